# no environment there: exit 2, and nothing is created
envlog -C missing sessions; rc=$?; test ! -e missing || echo "created missing"; exit $rc
