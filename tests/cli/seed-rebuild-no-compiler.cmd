# rebuild --verify where no NVRTC loads: one kernel cannot be compiled, the
# other has no recorded source; nothing was verified, so it is not green.
ENVLOG_NVRTC=/nonexistent/libnvrtc.so envlog -C "$FIXTURES/seed/rebuild" rebuild --verify
