# --until with a 12-digit session id prefix: the point of replay-until-stamp
cd "$FIXTURES/replay"
t2=$(envlog -C main sessions | awk '$3 == "tuner-2" {print $1}')
envlog -C main replay --until "${t2:0:12}:3"
