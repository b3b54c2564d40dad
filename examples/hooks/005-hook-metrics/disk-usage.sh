#!/bin/sh
# Hook metrics: every 10 seconds, reports the size of each file in /tmp as a gauge
# in the group "tmp-files" (files that disappeared drop out of /metrics on the next
# run), counts its runs with an ungrouped counter (never expires), and observes its
# own run time in a histogram. See `curl localhost:9115/metrics/hooks`.
if [ "$1" = "--config" ]; then
  cat <<'CONFIG'
configVersion: v1
schedule:
- name: every-10s
  crontab: "*/10 * * * * *"
CONFIG
  exit 0
fi
start=$(date +%s)
echo '{"name":"example_runs_total","add":1}' >> "$METRICS_PATH"
files=0
for f in /tmp/*; do
  [ -f "$f" ] || continue
  files=$((files + 1))
  size=$(wc -c < "$f")
  name=$(printf '%s' "$f" | tr -d '"\\')
  echo "{\"group\":\"tmp-files\",\"name\":\"example_tmp_file_bytes\",\"set\":$size,\"labels\":{\"file\":\"$name\"}}" >> "$METRICS_PATH"
done
# No files: expire the group explicitly, or its old series would stay.
[ "$files" -gt 0 ] || echo '{"group":"tmp-files","action":"expire"}' >> "$METRICS_PATH"
echo "{\"name\":\"example_run_seconds\",\"action\":\"observe\",\"value\":$(( $(date +%s) - start )),\"buckets\":[0,1,5]}" >> "$METRICS_PATH"
