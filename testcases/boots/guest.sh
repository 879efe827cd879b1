# Init ran this: the kernel booted. The check: the kernel says what it is.
test -r /proc/version
cat /proc/version
