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


{{/* The module and its configuration: a WasmPlugin's spec fields, a
TrafficExtension's spec.wasm. */}}
{{- define "ratebound.module" -}}
url: {{ .Values.image.url | quote }}
sha256: {{ .Values.image.sha256 | quote }}
imagePullPolicy: {{ .Values.image.imagePullPolicy }}
{{- with .Values.image.imagePullSecret }}
imagePullSecret: {{ . | quote }}
{{- end }}
failStrategy: {{ .Values.failStrategy }}
{{- /* The variable is named once, in the configuration; the VM is given
exactly that one (a mismatch would pass `check` on the config alone and
make the filter refuse it). */}}
{{- $env := dig "rate_limit_service" "key_secret" "env" "" (.Values.config | default dict) }}
{{- with .Values.keySecret.env }}
{{- if ne . $env }}
{{- fail (printf "keySecret.env %q is not the variable the configuration reads (config.rate_limit_service.key_secret.env %q): leave keySecret.env out, the chart takes the name from the configuration" . $env) }}
{{- end }}
{{- end }}
{{- /* During a rotation, the other secret's variable too
(key_secret.also_read.env), given the same way. */}}
{{- $also := dig "rate_limit_service" "key_secret" "also_read" "env" "" (.Values.config | default dict) }}
{{- if $env }}
vmConfig:
  env:
  {{- range $name, $value := dict $env .Values.keySecret.value $also .Values.keySecret.alsoReadValue }}
  {{- if $name }}
  - name: {{ $name }}
    {{- if eq $.Values.keySecret.valueFrom "HOST" }}
    valueFrom: HOST
    {{- else if eq $.Values.keySecret.valueFrom "INLINE" }}
    valueFrom: INLINE
    value: {{ required (printf "keySecret.valueFrom INLINE needs the value of %s (keySecret.value; keySecret.alsoReadValue for key_secret.also_read)" $name) $value | quote }}
    {{- else }}
    {{- fail (printf "keySecret.valueFrom %q: HOST (the proxy's environment, e.g. from a Secret) or INLINE (keySecret.value, written into the WasmPlugin)" $.Values.keySecret.valueFrom) }}
    {{- end }}
  {{- end }}
  {{- end }}
{{- end }}
pluginConfig:
  {{- toYaml .Values.config | nindent 2 }}
{{- end }}
