# A new output file: written whole, 0666 less the umask (it leaves the
# environment), no temporary file left beside it.
umask 022
envlog -C "$FIXTURES/envs/basic" bundle export b -o b.envb >/dev/null || exit 1
stat -c '%A %F' b.envb
umask 077
envlog -C "$FIXTURES/envs/basic" bundle export b -o private.envb >/dev/null || exit 1
stat -c '%A %F' private.envb
envlog -C "$FIXTURES/envs/basic" replay -o dump.json || exit 1
stat -c '%A %F' dump.json
ls
