# Tries to read files it must not see; paths of the worker's own files come on stdin.
read exe
read src
for p in /etc/shadow /etc/passwd /etc/hostname /root/.bash_history /proc/1/environ \
         /proc/1/cmdline /proc/1/mem /proc/kcore "$exe" "$src" /sys/fs/cgroup \
         /run/postgresql /var/lib/postgresql; do
	# a file counts when a byte of it can be read, a directory when it can be listed
	# (listing a file that exists, /proc/kcore, reads nothing)
	if [ -d "$p" ]; then
		if ls "$p" >/dev/null 2>&1; then echo "READ $p"; fi
	elif head -c 1 "$p" >/dev/null 2>&1; then
		echo "READ $p"
	fi
done
echo done
