# Sourced on the GPU host, which has no iproute2 and no network: Debian 12's
# ip and its libraries extracted under /opt/ipr, an `ip` wrapper on PATH.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p /opt/ipr/bin
for f in "$here"/*.deb; do dpkg -x "$f" /opt/ipr; done
mv /opt/ipr/bin/ip /opt/ipr/bin/ip.real
cat > /opt/ipr/bin/ip <<'W'
#!/bin/sh
LD_LIBRARY_PATH=/opt/ipr/usr/lib/x86_64-linux-gnu:/opt/ipr/lib/x86_64-linux-gnu exec /opt/ipr/bin/ip.real "$@"
W
chmod +x /opt/ipr/bin/ip
export PATH=/opt/ipr/bin:$PATH
ip -V
