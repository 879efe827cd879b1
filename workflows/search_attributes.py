"""kbisect's search attributes, as the workflows set them: `kbisect status` lists every
kind of job by these (where the cluster has them; the names are the contract's)."""

from temporalio.common import SearchAttributeKey

from kbisect.contract import SA_CULPRIT_NAME, SA_STATUS_NAME, SA_SUMMARY_NAME, SA_TESTCASE_NAME

SA_TESTCASE = SearchAttributeKey.for_keyword(SA_TESTCASE_NAME)
SA_STATUS = SearchAttributeKey.for_keyword(SA_STATUS_NAME)
SA_CULPRIT = SearchAttributeKey.for_keyword(SA_CULPRIT_NAME)
SA_SUMMARY = SearchAttributeKey.for_keyword(SA_SUMMARY_NAME)  # set by the client at start
SEARCH_ATTRIBUTES = (SA_TESTCASE, SA_STATUS, SA_CULPRIT, SA_SUMMARY)  # what a server registers
