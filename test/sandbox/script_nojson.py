# Prints no JSON line with "scores".
print("the answer looks fine to me")
print('{"score": 1000}')
print("[1, 2, 3]")
