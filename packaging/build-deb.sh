#!/usr/bin/env bash
# Builds diffcast_<version>_amd64.deb from the stripped binary and man page in DIST (make dist):
# the binary, the units, the sysusers file, the configuration as a conffile, the man page and
# maintainer scripts that create the group and enable the socket the Debian way.
#
#   packaging/build-deb.sh VERSION DIST
set -euo pipefail
cd "$(dirname "$0")/.."
version=$1
dist=$2
stage="$dist/diffcast_${version}_amd64"
rm -rf "$stage"
install -D -m 0755 "$dist/diffcastd" "$stage/usr/bin/diffcastd"
install -D -m 0755 "$dist/diffcast" "$stage/usr/bin/diffcast"
install -D -m 0644 "$dist/completions/diffcast.bash" "$stage/usr/share/bash-completion/completions/diffcast"
install -D -m 0644 "$dist/completions/_diffcast" "$stage/usr/share/zsh/vendor-completions/_diffcast"
install -D -m 0644 "$dist/completions/diffcast.fish" "$stage/usr/share/fish/vendor_completions.d/diffcast.fish"
install -D -m 0644 /dev/null "$stage/usr/share/man/man1/diffcast.1.gz"
gzip -9n < "$dist/diffcast.1" > "$stage/usr/share/man/man1/diffcast.1.gz"
install -d "$stage/lib/systemd/system" "$stage/usr/lib/sysusers.d" "$stage/etc/diffcast" \
  "$stage/usr/share/man/man8" "$stage/usr/share/doc/diffcast" "$stage/DEBIAN"
sed 's|/usr/local|/usr|g' systemd/diffcast.service > "$stage/lib/systemd/system/diffcast.service"
install -m 0644 systemd/diffcast.socket "$stage/lib/systemd/system/diffcast.socket"
install -m 0644 systemd/diffcast.sysusers "$stage/usr/lib/sysusers.d/diffcast.conf"
install -m 0644 config/diffcastd.yaml "$stage/etc/diffcast/diffcastd.yaml"
gzip -9n < "$dist/diffcastd.8" > "$stage/usr/share/man/man8/diffcastd.8.gz"
install -m 0644 README.md "$stage/usr/share/doc/diffcast/README.md"
[ -e docs/protocol.md ] && install -m 0644 docs/protocol.md "$stage/usr/share/doc/diffcast/protocol.md"
chmod 0644 "$stage/usr/share/man/man8/diffcastd.8.gz"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$stage/DEBIAN/"
echo "/etc/diffcast/diffcastd.yaml" > "$stage/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@SIZE@/$size/" packaging/debian/control > "$stage/DEBIAN/control"
dpkg-deb --root-owner-group --build "$stage" "$dist/diffcast_${version}_amd64.deb" >/dev/null
echo "$dist/diffcast_${version}_amd64.deb"
