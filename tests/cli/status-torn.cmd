# a torn tail: reported, exit 1
cd "$FIXTURES/replay" && envlog -C torn status
