# a torn tail: the records before it, and where good data ends
cd "$FIXTURES/envs" && envlog -C damaged cat 018fd0a3
