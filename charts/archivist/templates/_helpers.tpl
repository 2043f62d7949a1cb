{{/*
What each service is: fixed by the code, not by the operator (the values
set replicas and resources). port: its API's (none: no API); database: it
logs in to PostgreSQL as its own role; blob: writer or reader of the blob
store; maxConns: its pool (DATABASE_MAX_CONNS) where not the default 10.
*/}}
{{- define "archivist.catalog" -}}
curator: {component: curation, port: 8080, database: true, blob: writer, env: {INGEST_WORK_DIR: /var/lib/archivist/ingest}}
pwa: {component: research, port: 8081, database: true}
cwa: {component: research, database: true}
researcher: {component: research, blob: reader, env: {RESEARCHER_CACHE_DIR: /var/cache/archivist}}
indexer: {component: indexing, port: 8083, database: true, blob: writer, maxConns: "4", env: {INDEXER_REPOSITORY_PREFIX: warcs/, INDEXER_WORK_DIR: /var/lib/archivist/indexer}}
aggregator: {component: indexing, port: 8084, database: true, blob: writer, maxConns: "5"}
auditor: {component: integrity, port: 8082, database: true, blob: writer}
dashboard: {component: operations, port: 8090, apiClient: true, env: {DASHBOARD_CURATOR_URL: "https://curator:8080", DASHBOARD_PWA_URL: "https://pwa:8081", DASHBOARD_AUDITOR_URL: "https://auditor:8082", DASHBOARD_INDEXER_URL: "https://indexer:8083", DASHBOARD_AGGREGATOR_URL: "https://aggregator:8084", DASHBOARD_TLS_CA_FILE: /etc/archivist/api-tls/ca.crt}}
{{- end -}}

{{/* The catalog with every key of every service set (the engine is strict). */}}
{{- define "archivist.services" -}}
{{- $out := dict -}}
{{- range $name, $svc := include "archivist.catalog" . | fromYaml -}}
{{- $_ := set $out $name (merge $svc (dict "port" 0 "database" false "blob" "" "maxConns" "" "env" (dict) "apiClient" false)) -}}
{{- end -}}
{{ toYaml $out }}
{{- end -}}

{{/* The services in a fixed order. */}}
{{- define "archivist.serviceNames" -}}
[curator, pwa, cwa, researcher, indexer, aggregator, auditor, dashboard]
{{- end -}}

{{- define "archivist.chart" -}}
{{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Labels of every object: name, part-of, the release's instance. */}}
{{- define "archivist.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: archivist
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ include "archivist.tag" .root | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ include "archivist.chart" .root }}
{{- end -}}

{{- define "archivist.tag" -}}
{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* <registry>/<name>:<tag>, and @<digest> where image.digests has one. */}}
{{- define "archivist.image" -}}
{{- $ref := printf "%s/%s:%s" (.root.Values.image.registry | trimSuffix "/") .name (include "archivist.tag" .root) -}}
{{- with index .root.Values.image.digests .name -}}
{{- $ref = printf "%s@%s" $ref . -}}
{{- end -}}
{{ $ref }}
{{- end -}}

{{- define "archivist.natsURL" -}}
{{ .Values.nats.url | default (printf "tls://nats.%s.svc.cluster.local:4222" .Values.namespaces.nats) }}
{{- end -}}

{{- define "archivist.natsMonitoring" -}}
{{ .Values.nats.monitoringEndpoint | default (printf "nats-headless.%s.svc.cluster.local:8222" .Values.namespaces.nats) }}
{{- end -}}

{{/*
The connection string names no credentials: PGUSER and PGPASSWORD come
from the role's Secret as variables (a password may hold any character;
one pasted into a URL breaks on a "/", "@" or "%").
*/}}
{{- define "archivist.databaseURL" -}}
{{- with .Values.postgres.external -}}
{{- if .enabled -}}
postgres://{{ .host }}:{{ .port }}/{{ .database }}?sslmode=verify-full&sslrootcert=/etc/archivist/db-ca/ca.crt
{{- else -}}
postgres://archivist-db-rw.{{ $.Release.Namespace }}.svc:5432/archivist?sslmode=verify-full&sslrootcert=/etc/archivist/db-ca/ca.crt
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The Secret of the database server's CA (ca.crt). */}}
{{- define "archivist.databaseCA" -}}
{{- if .Values.postgres.external.enabled }}{{ .Values.postgres.external.caSecret }}{{ else }}archivist-db-ca{{ end -}}
{{- end -}}

{{/* A CloudNativePG barmanObjectStore's place and credentials: s's, else d's. */}}
{{- define "archivist.objectStore" -}}
destinationPath: {{ .s.destinationPath | default .d.destinationPath | quote }}
{{- with .s.endpointURL | default .d.endpointURL }}
endpointURL: {{ . | quote }}
{{- end }}
s3Credentials:
  {{- $secret := .s.s3Secret | default .d.s3Secret }}
  {{- if $secret }}
  accessKeyId: {name: {{ $secret }}, key: ACCESS_KEY_ID}
  secretAccessKey: {name: {{ $secret }}, key: ACCESS_SECRET_KEY}
  {{- else }}
  inheritFromIAMRole: true
  {{- end }}
{{- end -}}

{{/* GOMEMLIMIT: 90 % of a memory limit given in Mi or Gi. */}}
{{- define "archivist.gomemlimit" -}}
{{- $m := toString . -}}
{{- $mi := 0 -}}
{{- if hasSuffix "Gi" $m -}}
{{- $mi = mul (trimSuffix "Gi" $m | int) 1024 -}}
{{- else if hasSuffix "Mi" $m -}}
{{- $mi = trimSuffix "Mi" $m | int -}}
{{- else -}}
{{- fail (printf "memory limit %q: give it in Mi or Gi (GOMEMLIMIT is 90 %% of it)" $m) -}}
{{- end -}}
{{ div (mul $mi 9) 10 }}MiB
{{- end -}}

{{/* The pods' security context: non-root, the working area's group. */}}
{{- define "archivist.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: {{ .Values.ingest.fsGroup }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "archivist.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/* The shutdown grace: the preStop pause, the drain, and 10 s more. */}}
{{- define "archivist.grace" -}}
{{- $d := .Values.shutdownTimeout | toString -}}
{{- if not (regexMatch "^[0-9]+s$" $d) -}}
{{- fail (printf "shutdownTimeout %q: give it in seconds, e.g. 25s" $d) -}}
{{- end -}}
{{ add (trimSuffix "s" $d | int) .Values.preStopSeconds 10 }}
{{- end -}}

{{/* The NATS client's certificate and the servers' CA. */}}
{{- define "archivist.natsMounts" -}}
- {name: nats-tls, mountPath: /etc/archivist/nats-tls, readOnly: true}
- {name: nats-ca, mountPath: /etc/archivist/nats-ca, readOnly: true}
{{- end -}}

{{- define "archivist.natsVolumes" -}}
# cert-manager's certificate of this namespace's NATS clients: tls.crt and
# tls.key, the client's own for mutual TLS.
- name: nats-tls
  secret: {secretName: archivist-nats-client}
# The NATS servers' CA (certificates only, scripts/nats-trust).
- name: nats-ca
  configMap: {name: {{ .Values.nats.serverCAConfigMap }}}
{{- end -}}

{{/* The blob store's credentials for a writer or reader. */}}
{{- define "archivist.blobEnv" -}}
{{- $v := .root.Values.blob -}}
{{- if eq $v.credentials "static" }}
- name: S3_ACCESS_KEY_ID
  valueFrom: {secretKeyRef: {name: {{ index $v.staticSecrets .role }}, key: access-key-id}}
- name: S3_SECRET_ACCESS_KEY
  valueFrom: {secretKeyRef: {name: {{ index $v.staticSecrets .role }}, key: secret-access-key}}
{{- else if eq $v.credentials "webIdentity" }}
- name: AWS_ROLE_ARN
  value: {{ ternary $v.writerRoleArn $v.readerRoleArn (eq .role "writer") | required (printf "blob.%sRoleArn: the IAM role of the blob store's %s (credentials: webIdentity)" .role .role) | quote }}
- name: AWS_WEB_IDENTITY_TOKEN_FILE
  value: /var/run/secrets/archivist/blob/token
{{- end }}
{{- end -}}

{{- define "archivist.serviceAccount" -}}
{{ ternary "archivist-blob" "archivist-blob-reader" (eq . "writer") }}
{{- end -}}

{{/*
The CIDRs egress to 0.0.0.0/0 leaves out: link-local (cloud metadata)
and egress.except (the cluster's pod and service ranges).
*/}}
{{- define "archivist.egressExcept" -}}
{{- $list := list "169.254.0.0/16" -}}
{{- range .Values.egress.except }}{{ $list = append $list . }}{{ end -}}
{{ toJson $list }}
{{- end -}}

{{/*
The names an API is reached by in the cluster (its certificate's and
API_ALLOWED_HOSTS), and those of api.allowedHosts (an Ingress's).
*/}}
{{- define "archivist.apiHosts" -}}
{{- $ns := .root.Release.Namespace -}}
{{- $hosts := list .name (printf "%s.%s" .name $ns) (printf "%s.%s.svc" .name $ns) (printf "%s.%s.svc.cluster.local" .name $ns) -}}
{{ toJson $hosts }}
{{- end -}}


{{- /*
archivist.placement: where a pod runs and what marks it, as YAML: the
chart's placement with the service's (.v.placement; .v empty for the
migrate Job) laid over it. nodeSelector, podLabels and podAnnotations
merge, the service's keys winning; any other key the service sets
replaces the chart's.
*/ -}}
{{- define "archivist.placement" -}}
{{- $g := .root.Values.placement | default dict -}}
{{- $s := get (.v | default dict) "placement" | default dict -}}
{{- $p := dict -}}
{{- range $k := list "tolerations" "affinity" "topologySpreadConstraints" "priorityClassName" -}}
{{- if hasKey $s $k -}}
{{- $_ := set $p $k (get $s $k) -}}
{{- else if hasKey $g $k -}}
{{- $_ := set $p $k (get $g $k) -}}
{{- end -}}
{{- end -}}
{{- range $k := list "nodeSelector" "podLabels" "podAnnotations" -}}
{{- $m := merge (deepCopy (get $s $k | default dict)) (deepCopy (get $g $k | default dict)) -}}
{{- if $m -}}
{{- $_ := set $p $k $m -}}
{{- end -}}
{{- end -}}
{{- toYaml $p -}}
{{- end -}}

{{- /*
archivist.placementSpec: the pod spec's fields of a placement (.p, from
archivist.placement), indented for a pod spec under a template; without
its topology spread (the caller decides).
*/ -}}
{{- define "archivist.placementSpec" -}}
{{- with get .p "priorityClassName" }}
priorityClassName: {{ . }}
{{- end }}
{{- with get .p "nodeSelector" }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with get .p "tolerations" }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with get .p "affinity" }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The Secret a credential comes from: secrets.<kind>.<name> where named
(existingSecret), else the name `archivist secrets` makes (kind nats:
nats-<user>; database: archivist-db-<service>).
*/}}
{{- define "archivist.secret" -}}
{{- $named := index .root.Values.secrets .kind | default dict -}}
{{- $default := ternary (printf "nats-%s" .name) (printf "archivist-db-%s" .name) (eq .kind "nats") -}}
{{- index $named .name | default $default -}}
{{- end -}}

{{/* The migrations' role, the database's owner: CloudNativePG's generated archivist-db-app, or postgres.external.ownerSecret. */}}
{{- define "archivist.ownerSecret" -}}
{{- if .Values.postgres.external.enabled }}{{ .Values.postgres.external.ownerSecret }}{{ else }}archivist-db-app{{ end -}}
{{- end -}}
