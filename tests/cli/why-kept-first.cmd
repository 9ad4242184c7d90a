# conv_3x3: two local values; the one recorded first stands
cd "$FIXTURES/replay" && envlog -C main why conv_3x3
