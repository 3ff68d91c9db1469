# One string far over the memory limit: memory_limit_exceeded, not a MemoryError
# (runtime_error) at the address-space backstop.
x = " " * (3 << 30)
print(len(x))
