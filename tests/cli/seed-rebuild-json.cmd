# The same as JSON; --partial does not make a run that checked nothing green.
ENVLOG_NVRTC=/nonexistent/libnvrtc.so envlog -C "$FIXTURES/seed/rebuild" rebuild --verify --partial --json
