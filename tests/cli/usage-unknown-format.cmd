# an environment of a format this envlog does not know: exit 3
mkdir future && printf "envlog environment format 99\n" >future/FORMAT && envlog -C future cat
