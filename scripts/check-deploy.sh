#!/usr/bin/env bash
# check-deploy.sh: the deployment files are what they claim (test.sh runs it; a few seconds).
#
#   - deploy/prometheus: `promtool check rules` and `promtool test rules` (each alert fires on the
#     series that should raise it, and only then)
#   - deploy/alternative-fabric-manager.service: `systemd-analyze verify` reports nothing, and
#     `systemd-analyze security --offline=true` rates it at most MAX_EXPOSURE
#
# The Grafana dashboard's JSON, and the metric names it and the rules read, are checked by the tests
# of internal/metrics (TestDeployFilesUseExportedMetrics).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/sbin:/sbin

MAX_EXPOSURE=4.0
UNIT=deploy/alternative-fabric-manager.service

die() { echo "check-deploy: $*" >&2; exit 1; }

promtool check rules deploy/prometheus/afm-alerts.yml
promtool test rules deploy/prometheus/afm-alerts.test.yml

# verify wants ExecStart's binary to exist: a copy of the unit points at a stand-in. The unit's own
# name is kept, since verify reads the unit type from it.
work=$(mktemp -d /tmp/afm-check-deploy.XXXXXX)
trap 'rm -rf "$work"' EXIT
install -m 0755 /bin/true "$work/alternative-fabric-manager"
sed "s|/usr/local/bin/alternative-fabric-manager|$work/alternative-fabric-manager|g" "$UNIT" >"$work/${UNIT##*/}"
verify=$(systemd-analyze verify "$work/${UNIT##*/}" 2>&1) || die "systemd-analyze verify failed: $verify"
[[ -z $verify ]] || die "systemd-analyze verify reports: $verify"
echo "systemd-analyze verify $UNIT: clean"

report=$(systemd-analyze security --offline=true --no-pager "$UNIT" 2>&1) || true
score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$report")
[[ -n $score ]] || die "no exposure level in systemd-analyze security's output: $report"
awk -v s="$score" -v max="$MAX_EXPOSURE" 'BEGIN { exit !(s <= max) }' ||
	die "$UNIT is rated $score, more than $MAX_EXPOSURE: $(grep '✗' <<<"$report")"
echo "systemd-analyze security $UNIT: $score (at most $MAX_EXPOSURE)"
