# Grows a list of distinct strings until something stops it.
a = []
while True:
    a.append("x" * (1 << 20) + str(len(a)))
