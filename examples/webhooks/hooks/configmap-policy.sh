#!/usr/bin/env bash
# Admission example: a validating binding refuses ConfigMaps that carry a
# "password" key and warns about ConfigMaps without labels; a mutating binding
# adds the label "checked-by: shell-operator". Needs jq and base64.
set -euo pipefail

if [ "${1:-}" = "--config" ]; then
  cat <<'CONFIG'
configVersion: v1
kubernetesValidating:
- name: configmap-policy.example.com
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["configmaps"]
    scope: Namespaced
kubernetesMutating:
- name: configmap-label.example.com
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["configmaps"]
    scope: Namespaced
CONFIG
  exit 0
fi

ctx="$BINDING_CONTEXT_PATH"
type=$(jq -r '.[0].type' "$ctx")
name=$(jq -r '.[0].review.request.object.metadata.name' "$ctx")

if [ "$type" = "Mutating" ]; then
  if jq -e '.[0].review.request.object.metadata.labels' "$ctx" >/dev/null; then
    patch='[{"op":"add","path":"/metadata/labels/checked-by","value":"shell-operator"}]'
  else
    patch='[{"op":"add","path":"/metadata/labels","value":{"checked-by":"shell-operator"}}]'
  fi
  jq -n --arg p "$(printf '%s' "$patch" | base64 -w0)" '{allowed: true, patch: $p}' > "$VALIDATING_RESPONSE_PATH"
  exit 0
fi

if jq -e '.[0].review.request.object.data | has("password")' "$ctx" >/dev/null 2>&1; then
  jq -n --arg m "ConfigMap $name holds a password: use a Secret" \
    '{allowed: false, message: $m}' > "$VALIDATING_RESPONSE_PATH"
elif jq -e '.[0].review.request.object.metadata.labels // {} | length == 0' "$ctx" >/dev/null; then
  jq -n --arg w "ConfigMap $name has no labels" '{allowed: true, warnings: [$w]}' > "$VALIDATING_RESPONSE_PATH"
else
  echo '{"allowed": true}' > "$VALIDATING_RESPONSE_PATH"
fi
