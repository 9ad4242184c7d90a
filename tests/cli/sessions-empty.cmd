# an environment with no session yet
mkdir env && printf "envlog environment format 1\n" >env/FORMAT && envlog -C env sessions
