"""The application's jobs: the client that starts and follows them, the checked request,
the local service, `try`'s pipeline and `bisect --kernels`' phase."""
