{{/* Labels of every object the chart creates. */}}
{{- define "orderly.labels" -}}
app.kubernetes.io/name: orderly
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The manager's pods, as the Services, the PDB and the Deployment select them. */}}
{{- define "orderly.selectorLabels" -}}
app.kubernetes.io/name: orderly
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{/* The names of the enabled controllers, sorted, comma-separated: --controllers. */}}
{{- define "orderly.controllers" -}}
{{- $names := list -}}
{{- range $name, $c := .Values.controllers -}}
{{- if $c.enabled -}}{{- $names = append $names $name -}}{{- end -}}
{{- end -}}
{{- if not $names -}}{{- fail "controllers: enable at least one controller" -}}{{- end -}}
{{- $names | sortAlpha | join "," -}}
{{- end -}}

{{/* The manager image: by digest when one is given. */}}
{{- define "orderly.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* Serves the webhook with a cert-manager Certificate (mounted here). */}}
{{- define "orderly.webhookCertDir" -}}/etc/orderly/webhook-certs{{- end -}}

{{/* "true" when the manager serves a webhook: always, since it converts SleepSchedules
and DevDatabases between v1alpha1 and v1beta1 whichever controllers run (besides
LabelPolicy's fallback and ImagePolicy's checks from scan results). */}}
{{- define "orderly.webhookServed" -}}true{{- end -}}

{{/* "true" when the manager mounts volumes: cert-manager's webhook certificate, the
vulnerability database. */}}
{{- define "orderly.webhookCertMounted" -}}
{{- if and (include "orderly.webhookServed" .) .Values.webhook.certManager.enabled -}}true{{- end -}}
{{- end -}}
