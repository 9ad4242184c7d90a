# a directory that is not an environment: invalid input, exit 3
mkdir notes && echo hello >notes/todo.txt && envlog -C notes sessions
