#!/usr/bin/env bash
# release-test-deb.sh: the Debian package's life in a clean Debian 12, run INSIDE a debian:bookworm-slim
# container by scripts/release-test.sh with DEB (the amd64 .deb) and VERSION in the environment.
#
# Installs what the package Depends on (opensm) from the mirror, notes every path of the file system,
# then: dpkg -i puts every file where the unit expects it, with the modes and the system user it
# expects, and --version prints VERSION; dpkg -r removes all but the conffiles; dpkg --purge leaves
# the file system as it was before dpkg -i (but for dpkg's own records and logs).
set -euo pipefail
NAME=alternative-fabric-manager
UNIT=/lib/systemd/system/$NAME.service

die() { echo "FAIL: $*" >&2; exit 1; }
say() { echo "deb: $*"; }
mode() { stat -c '%a %U:%G' "$1"; }
unit_value() { sed -n "s/^$1=//p" "$UNIT" | head -n 1; }
snapshot() { # every path but dpkg's records, its logs and the account files' backups
	find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /dist -o -path /var/lib/dpkg \
		-o -path /var/log -o -path /tmp -o -path /var/cache/debconf -o -path /var/lib/apt \) -prune \
		-o -print | grep -vE '^/etc/((passwd|group|shadow|gshadow)-|\.pwd\.lock)$' | LC_ALL=C sort
}

export DEBIAN_FRONTEND=noninteractive
# No service starts in the container (Debian's opensm would try): invoke-rc.d asks policy-rc.d.
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends opensm >/dev/null 2>&1 || die "apt-get install opensm failed"
snapshot >/tmp/before

dpkg -i "$DEB" >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; die "dpkg -i failed"; }
say "dpkg -i: $(dpkg-query -W -f '${Package} ${Version} ${Status}' $NAME)"

# The unit's paths: ExecStart's binary and configuration, the directories it makes read-only or its own.
exec_start=$(unit_value ExecStart)
binary=${exec_start%% *}
config=$(sed -n 's/.*--config-file \([^ ]*\).*/\1/p' <<<"$exec_start")
[[ -x $binary ]] || die "the unit's ExecStart binary $binary is not installed"
[[ $($binary --version) == "$NAME $VERSION (commit "*", built "*")" ]] || die "--version printed \"$($binary --version)\""
[[ -f $config ]] || die "the unit's --config-file $config is not installed"
[[ $(mode "$config") == "640 root:$NAME" ]] || die "$config is $(mode "$config"), want 640 root:$NAME"
ro=$(unit_value ReadOnlyPaths)
[[ $(mode "$ro") == "750 root:$NAME" ]] || die "the unit's ReadOnlyPaths $ro is $(mode "$ro"), want 750 root:$NAME"
state=/var/lib/$(unit_value StateDirectory)
[[ $(mode "$state") == "$(unit_value StateDirectoryMode | sed 's/^0//') root:root" ]] ||
	die "the unit's StateDirectory $state is $(mode "$state"), want mode $(unit_value StateDirectoryMode)"
logrotate=/etc/logrotate.d/$NAME
grep -qF "$state/opensm/opensm.log" "$logrotate" || die "$logrotate does not rotate $state/opensm/opensm.log"
for f in "$config" "$logrotate"; do
	grep -qxF "$f" "/var/lib/dpkg/info/$NAME.conffiles" || die "$f is not a conffile"
done
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd $NAME) || die "no system user $NAME"
((uid < 1000)) && [[ $shell == /usr/sbin/nologin ]] || die "user $NAME is uid $uid with shell $shell, want a system user"
IFS=: read -r _ _ smuid _ _ _ smshell < <(getent passwd afm-opensm) || die "no system user afm-opensm"
((smuid < 1000)) && [[ $smshell == /usr/sbin/nologin && $(id -Gn afm-opensm) == afm-opensm ]] ||
	die "user afm-opensm is uid $smuid in groups $(id -Gn afm-opensm), want a system user in its own group only"
grep -qx 'user = afm-opensm' "$config" || die "$config does not run OpenSM as afm-opensm on a first install"
rules=/lib/udev/rules.d/91-$NAME.rules
grep -q 'KERNEL=="umad\*".*GROUP="afm-opensm"' "$rules" && grep -q 'KERNEL=="issm\*".*GROUP="afm-opensm"' "$rules" ||
	die "$rules does not give the umad and issm devices to afm-opensm"
say "$binary: $($binary --version)"
say "$config $(mode "$config"), $ro $(mode "$ro"), $state $(mode "$state"), user $NAME uid $uid"

# An upgrade (here the same package again: postinst sees the version configured before) keeps the
# modes the operator chose for the file that holds the secrets.
chmod 0600 "$config"
dpkg -i "$DEB" >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; die "dpkg -i over the installed package failed"; }
[[ $(mode "$config") == "600 root:$NAME" ]] || die "an upgrade made $config $(mode "$config"), the operator's 600 lost"
say "upgrade: $config kept the operator's $(mode "$config")"

dpkg -r $NAME >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; die "dpkg -r failed"; }
[[ ! -e $binary && ! -e $UNIT ]] || die "dpkg -r left the binary or the unit"
[[ -f $config && -f $logrotate ]] || die "dpkg -r removed a conffile"
[[ $(dpkg-query -W -f '${Status}' $NAME) == "deinstall ok config-files" ]] || die "after dpkg -r: $(dpkg-query -W -f '${Status}' $NAME)"
say "dpkg -r: binary and unit gone, conffiles kept"

dpkg --purge $NAME >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; die "dpkg --purge failed"; }
! dpkg-query -W $NAME >/dev/null 2>&1 || die "dpkg still knows $NAME after --purge"
for u in $NAME afm-opensm; do
	! getent passwd $u >/dev/null && ! getent group $u >/dev/null || die "dpkg --purge left the user or group $u"
done
snapshot >/tmp/after
diff /tmp/before /tmp/after || die "the file system after dpkg --purge differs from before dpkg -i (above)"
say "dpkg --purge: no file, user or group of the package left"
