{{/* Labels on every object. */}}
{{- define "ratebound.labels" -}}
app.kubernetes.io/name: ratebound
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The proxies an EnvoyFilter patches: envoyFilterTargetRefs, else the
WasmPlugin's targetRefs, else its selector labels. A Service target is not a
proxy (its waypoint is): refused with a message. */}}
{{- define "ratebound.envoyFilterTarget" -}}
{{- $refs := .Values.envoyFilterTargetRefs | default .Values.targetRefs -}}
{{- if $refs }}
{{- range $refs }}
{{- if ne .kind "Gateway" }}
{{- fail (printf "an EnvoyFilter attaches to Gateways (waypoints are Gateways), not to a %s: set envoyFilterTargetRefs to the waypoint that serves %s" .kind .name) }}
{{- end }}
{{- end }}
targetRefs:
{{ toYaml $refs }}
{{- else }}
workloadSelector:
  labels:
{{ toYaml .Values.selector.matchLabels | indent 4 }}
{{- end }}
{{- end }}

{{/* The generation context of a patch: GATEWAY for the classic ingress
gateway; ANY for targetRefs, where the target may be a gateway or a waypoint
(an added cluster means the same in every context). */}}
{{- define "ratebound.context" -}}
{{- if or .Values.envoyFilterTargetRefs .Values.targetRefs }}ANY{{ else }}GATEWAY{{ end -}}
{{- end }}
