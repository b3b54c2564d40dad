#!/usr/bin/env bash
# Conversion example (the rules of flant's conversion documentation): CronTabs go
# from unstable.crontab.io/v1beta1 to stable.example.com/v1beta1, then v1beta2, then
# v1; the operator chains the rules. v1beta1 keeps the schedule as an array
# (spec.cron), later versions as a string (spec.cronSpec). Needs jq.
set -euo pipefail

if [ "${1:-}" = "--config" ]; then
  cat <<'CONFIG'
configVersion: v1
kubernetesCustomResourceConversion:
- name: crontab-versions
  crdName: crontabs.stable.example.com
  conversions:
  - fromVersion: unstable.crontab.io/v1beta1
    toVersion: stable.example.com/v1beta1
  - fromVersion: stable.example.com/v1beta1
    toVersion: stable.example.com/v1beta2
  - fromVersion: v1beta2
    toVersion: v1
CONFIG
  exit 0
fi

jq -c '.[0] as $c
  | ($c.review.request.desiredAPIVersion | split("/")[0]) as $group
  | ($c.toVersion | if contains("/") then . else $group + "/" + . end) as $to
  | {convertedObjects: [$c.review.request.objects[]
      | .apiVersion = $to
      | if ($to | endswith("/v1beta2")) and (.spec.cron | type) == "array"
        then .spec.cronSpec = (.spec.cron | join(" ")) | del(.spec.cron)
        else . end]}' "$BINDING_CONTEXT_PATH" > "$CONVERSION_RESPONSE_PATH"
