# The script runs under sh -e: a failed read (dd exits 1) ends it with that status.
dd if="$KB_DISK_data" of=/dev/null bs=64k count=64
echo "read 4 MiB of $KB_DISK_data"
