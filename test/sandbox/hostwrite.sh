# Tries to write on the host: the path of a host canary file comes on stdin.
read target
for p in "$target" /etc/passwd /etc/arbiter-pwned /usr/bin/arbiter-pwned /bin/arbiter-pwned \
         /arbiter-pwned /proc/sys/kernel/hostname /dev/arbiter-pwned; do
	if (echo pwned > "$p") 2>/dev/null; then echo "WROTE $p"; fi
done
# through symlinks created in the work directory and /tmp
for d in /work /tmp; do
	ln -s "$target" "$d/link" 2>/dev/null && (echo pwned > "$d/link") 2>/dev/null && echo "WROTE via $d/link"
	ln -s /etc/passwd "$d/link2" 2>/dev/null && (echo pwned >> "$d/link2") 2>/dev/null && echo "WROTE via $d/link2"
	ln "$target" "$d/hard" 2>/dev/null && echo "HARDLINKED $d/hard"
done
touch /work/ok-here && echo "work writable"
touch /tmp/ok-here && echo "tmp writable"
