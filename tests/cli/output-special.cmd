# FIFOs and devices are written through, never replaced; directories,
# sockets and symbolic links (without --follow) are refused.
mkfifo pipe
cat pipe > from-pipe &
envlog -C "$FIXTURES/envs/basic" replay -o pipe; echo "fifo: $?"
wait
envlog -C "$FIXTURES/envs/basic" replay > want.json
cmp from-pipe want.json && echo "the reader got the dump"
stat -c '%F' pipe
envlog -C "$FIXTURES/envs/basic" bundle export b -o /dev/null | sed "s/[0-9]* bytes/N bytes/"; echo "/dev/null: ${PIPESTATUS[0]}"
stat -c '%F' /dev/null
envlog -C "$FIXTURES/envs/basic" replay -o /dev/full; echo "/dev/full: $?"
mkdir d
envlog -C "$FIXTURES/envs/basic" replay -o d; echo "directory: $?"
/usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("sock")'
envlog -C "$FIXTURES/envs/basic" replay -o sock; echo "socket: $?"
echo old > target
ln -s target link
envlog -C "$FIXTURES/envs/basic" replay -o link; echo "link: $?"
cat target
envlog -C "$FIXTURES/envs/basic" replay -o link --follow; echo "link --follow: $?"
cat target
envlog -C "$FIXTURES/envs/basic" replay -o link --follow --force; echo "link --follow --force: $?"
cmp target want.json && echo "the target holds the dump"
stat -c '%F' link
envlog -C new bundle import pipe; echo "import from a FIFO: $?"
ln -s nowhere dangling
envlog -C "$FIXTURES/envs/basic" replay -o dangling --follow; echo "dangling: $?"
ls
