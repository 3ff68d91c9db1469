# Sleeps past the wall-clock limit while using no CPU: time_limit_exceeded.
sleep 30
echo woke
