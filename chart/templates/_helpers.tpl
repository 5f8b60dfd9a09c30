{{/*
Names and labels, as `helm create` makes them.
*/}}
{{- define "labeller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "labeller.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "labeller.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "labeller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "labeller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "labeller.labels" -}}
helm.sh/chart: {{ include "labeller.chart" . }}
{{ include "labeller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: labeller
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "labeller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "labeller.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "labeller.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{- define "labeller.leaseName" -}}
{{- .Values.leaderElection.leaseName | default (include "labeller.fullname" .) }}
{{- end }}

{{- define "labeller.configPath" -}}
/etc/labeller/kinds.yaml
{{- end }}

{{- define "labeller.configMapName" -}}
{{- .Values.existingConfigMap | default (include "labeller.fullname" .) }}
{{- end }}

{{/*
A Go-style duration ("1m30s", "500ms", as labeller's flags take them) in seconds, as a string
holding a float. The schema has already checked the syntax.
*/}}
{{- define "labeller.seconds" -}}
{{- $units := dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- $total := 0.0 }}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ms|h|m|s)" . -1 }}
{{- $amount := regexFind "^[0-9.]+" . }}
{{- $total = addf $total (mulf (float64 $amount) (get $units (trimPrefix $amount .))) }}
{{- end }}
{{- $total }}
{{- end }}

{{/*
Kubernetes built-ins whose API group and scope the chart knows, so that their kinds need no
`group`: plural → group, and the other names kubectl accepts (singular = lowercase kind, short
names). Everything else needs `group` (and `scope: Cluster` when cluster-scoped).
*/}}
{{- define "labeller.builtinResources" -}}
configmaps: {group: "", names: [configmap, cm]}
services: {group: "", names: [service, svc]}
secrets: {group: "", names: [secret]}
pods: {group: "", names: [pod, po]}
serviceaccounts: {group: "", names: [serviceaccount, sa]}
persistentvolumeclaims: {group: "", names: [persistentvolumeclaim, pvc]}
namespaces: {group: "", names: [namespace, ns], clusterScoped: true}
deployments: {group: apps, names: [deployment, deploy]}
statefulsets: {group: apps, names: [statefulset, sts]}
daemonsets: {group: apps, names: [daemonset, ds]}
replicasets: {group: apps, names: [replicaset, rs]}
jobs: {group: batch, names: [job]}
cronjobs: {group: batch, names: [cronjob, cj]}
ingresses: {group: networking.k8s.io, names: [ingress, ing]}
networkpolicies: {group: networking.k8s.io, names: [networkpolicy, netpol]}
poddisruptionbudgets: {group: policy, names: [poddisruptionbudget, pdb]}
{{- end }}

{{/*
The related objects a list of templates reads, as YAML {namespace, owner, root: bool}, parsed as
labeller parses them (src/config/template.ts): in each {{…}}, the variable before any `|`
filter, or a lookup's key (`teams[namespace.labels.team].costCenter`) reads the relation it
starts with (`namespace.`, `owner.`, `root.`). `{{namespace}}` is the object's own namespace.
*/}}
{{- define "labeller.templateReads" -}}
{{- $reads := dict "namespace" false "owner" false "root" false }}
{{- range $template := . }}
{{- range regexFindAll "\\{\\{.*?\\}\\}" (toString $template) -1 }}
{{- $variable := trimPrefix "{{" . | trimSuffix "}}" | regexFind "^[^|]*" | trim }}
{{- $variable = regexReplaceAll "^[a-z][-a-z0-9]*\\[(.*)\\](\\.[^\\]]*)?$" $variable "${1}" | trim }}
{{- range $relation := keys $reads }}
{{- if hasPrefix (printf "%s." $relation) $variable }}
{{- $_ := set $reads $relation true }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $reads }}
{{- end }}

{{/*
The configured kinds, resolved for RBAC and for labeller, as YAML {kinds: [...]}; each item:
  plural, group, clusterScoped  what RBAC needs
  namespaces                    the namespaces the kind is watched in (empty: all)
  reads                         {namespace, owner, root}: the related objects its label and
                                annotation templates read (labeller.templateReads)
  config                        the kinds.yaml entry: without the chart-only fields, `resource`
                                qualified with its group (`deployments.apps`, `widgets.example.com`)
                                so that labeller resolves exactly what RBAC grants.
The every-kind entry (`resource: "*"`, with labeller's own `scope` and `exclude`) is plural and
group "*": every resource of every group, in a ClusterRole unless its scope is namespaced and it
has namespaces (its own, or watchNamespaces), then in a Role in each of them.
Fails with a message that says what to write for an unknown resource, a duplicate and a kind
without labels.
*/}}
{{- define "labeller.kinds" -}}
{{- $builtins := include "labeller.builtinResources" . | fromYaml }}
{{- $globalLabels := .Values.labels | default dict }}
{{- $globalAnnotations := .Values.annotations | default dict }}
{{- $namespaced := gt (len .Values.watchNamespaces) 0 }}
{{- $seen := dict }}
{{- $kinds := list }}
{{- range $i, $kind := .Values.kinds }}
{{- $where := printf "kinds[%d] (resource: %s)" $i $kind.resource }}
{{- $every := eq $kind.resource "*" }}
{{- $plural := "" }}
{{- $group := "" }}
{{- $version := "" }}
{{- $clusterScoped := false }}
{{- if $every }}
{{- if hasKey $kind "group" }}
{{- fail (printf "%s: the every-kind entry covers every API group: remove `group` (leave kinds out with `exclude`)" $where) }}
{{- end }}
{{- $plural = "*" }}
{{- $group = "*" }}
{{- $scope := $kind.scope | default "namespaced" }}
{{- if not (has $scope (list "namespaced" "cluster" "all")) }}
{{- fail (printf "%s: the every-kind entry's scope is namespaced, cluster or all (lowercase), not %s" $where $scope) }}
{{- end }}
{{- if and (ne $scope "namespaced") $namespaced }}
{{- fail (printf "%s: scope %s covers cluster-scoped kinds, which need a ClusterRole, but namespaced mode (watchNamespaces) grants Roles only: use scope: namespaced, or a cluster-wide release" $where $scope) }}
{{- end }}
{{- if and (eq $scope "cluster") $kind.namespaces }}
{{- fail (printf "%s: scope cluster covers cluster-scoped kinds only, which have no namespaces: remove `namespaces`" $where) }}
{{- end }}
{{- /* Cluster-scoped kinds need the ClusterRole, which then covers every namespace too. */}}
{{- $clusterScoped = ne $scope "namespaced" }}
{{- else }}
{{- if hasKey $kind "exclude" }}
{{- fail (printf "%s: only the every-kind entry (resource: \"*\") takes `exclude`: remove it" $where) }}
{{- end }}
{{- if and $kind.scope (not (has $kind.scope (list "Namespaced" "Cluster"))) }}
{{- fail (printf "%s: scope %s is for the every-kind entry (resource: \"*\"); a kind's own scope, for RBAC, is Namespaced or Cluster" $where $kind.scope) }}
{{- end }}
{{- /* kubectl-style: name, name.group or name.version.group */}}
{{- $parts := splitList "." $kind.resource }}
{{- $name := first $parts }}
{{- $qualifiers := rest $parts }}
{{- $qualified := gt (len $qualifiers) 0 }}
{{- if and $qualified (regexMatch "^v[0-9]+((alpha|beta)[0-9]+)?$" (first $qualifiers)) }}
{{- $version = first $qualifiers }}
{{- $group = rest $qualifiers | join "." }}
{{- else if $qualified }}
{{- $group = join "." $qualifiers }}
{{- end }}
{{- if hasKey $kind "group" }}
{{- if $qualified }}
{{- fail (printf "%s: give the API group once: either `resource: %s` with `group: %s`, or `resource: %s.%s` without `group`" $where $name $kind.group $name $kind.group) }}
{{- end }}
{{- $qualified = true }}
{{- $group = $kind.group }}
{{- end }}
{{- /* A built-in the chart knows, by any of its names (in the given group, if any)? */}}
{{- $clusterScoped = eq ($kind.scope | default "Namespaced") "Cluster" }}
{{- range $candidate, $builtin := $builtins }}
{{- if and (or (eq (lower $name) $candidate) (has (lower $name) $builtin.names)) (or (not $qualified) (eq $group $builtin.group)) }}
{{- $plural = $candidate }}
{{- $group = $builtin.group }}
{{- $clusterScoped = $builtin.clusterScoped | default false }}
{{- end }}
{{- end }}
{{- if not $plural }}
{{- if not $qualified }}
{{- fail (printf "%s: the chart does not know the API group of %q, so it cannot grant RBAC for it. For a custom resource, add its group and write its plural: `resource: %s` with `group: example.com` (see `kubectl api-resources`). Known without group: %s" $where $name $name (keys $builtins | sortAlpha | join ", ")) }}
{{- end }}
{{- if ne $name (lower $name) }}
{{- fail (printf "%s: write the resource's plural name in lowercase (e.g. %q), not its kind: RBAC rules name plurals (see `kubectl api-resources`)" $where (printf "%ss" (lower $name))) }}
{{- end }}
{{- $plural = $name }}
{{- end }}
{{- end }}
{{- /* Once per resource, as labeller wants it. */}}
{{- $id := printf "%s.%s" $plural $group | trimSuffix "." }}
{{- if hasKey $seen $id }}
{{- fail (printf "%s: the same resource as kinds[%d] (%s): merge the two entries" $where (get $seen $id) $id) }}
{{- end }}
{{- $_ := set $seen $id $i }}
{{- /* Where it is watched, and whether a Role can grant that. */}}
{{- $namespaces := $kind.namespaces | default $.Values.watchNamespaces }}
{{- if and $clusterScoped $kind.namespaces (not $every) }}
{{- fail (printf "%s: %s is cluster-scoped, so it has no namespaces: remove `namespaces`" $where $id) }}
{{- end }}
{{- if and $clusterScoped $namespaced }}
{{- fail (printf "%s: %s is cluster-scoped and needs a ClusterRole, but namespaced mode (watchNamespaces) grants Roles only: remove this kind or install a cluster-wide release for it" $where $id) }}
{{- end }}
{{- if $clusterScoped }}
{{- $namespaces = list }}
{{- end }}
{{- /* Labels or annotations: at least one after merging with the global ones; label constants must be valid values. */}}
{{- $effective := deepCopy $globalLabels }}
{{- range $key, $value := $kind.labels }}
{{- if kindIs "invalid" $value }}
{{- if not (hasKey $globalLabels $key) }}
{{- fail (printf "%s: labels[%q] is null, which drops a global label, but there is no global label %q: remove it" $where $key $key) }}
{{- end }}
{{- $_ := unset $effective $key }}
{{- else }}
{{- $_ := set $effective $key $value }}
{{- end }}
{{- end }}
{{- $annotations := deepCopy $globalAnnotations }}
{{- range $key, $value := $kind.annotations }}
{{- if kindIs "invalid" $value }}
{{- if not (hasKey $globalAnnotations $key) }}
{{- fail (printf "%s: annotations[%q] is null, which drops a global annotation, but there is no global annotation %q: remove it" $where $key $key) }}
{{- end }}
{{- $_ := unset $annotations $key }}
{{- else }}
{{- $_ := set $annotations $key $value }}
{{- end }}
{{- end }}
{{- if and (not $effective) (not $annotations) }}
{{- fail (printf "%s: no labels or annotations to apply: give this kind `labels` or set the global `labels`" $where) }}
{{- end }}
{{- range $key, $value := $effective }}
{{- if and (not (contains "{{" $value)) (or (gt (len $value) 63) (not (regexMatch "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$" $value))) }}
{{- fail (printf "%s: label %s=%q: not a valid label value: at most 63 characters, alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric (or a template such as {{name}})" $where $key $value) }}
{{- end }}
{{- end }}
{{- /* Which related objects its templates read, labels and annotations alike: they need read access too. */}}
{{- $reads := include "labeller.templateReads" (concat (values $effective) (values $annotations)) | fromYaml }}
{{- $resource := $plural }}
{{- if and $group (not $every) }}
{{- $resource = printf "%s.%s" $plural (list $version $group | compact | join ".") }}
{{- end }}
{{- /* The every-kind entry's scope is labeller's own; other kinds' scope is the chart's. */}}
{{- $config := ternary (omit $kind "group") (omit $kind "group" "scope") $every }}
{{- $_ := set $config "resource" $resource }}
{{- $kinds = append $kinds (dict "plural" $plural "group" $group "clusterScoped" $clusterScoped "namespaces" $namespaces "config" $config "reads" $reads) }}
{{- end }}
{{- toYaml (dict "kinds" $kinds) }}
{{- end }}

{{/*
labeller's config file: the kinds.yaml part of the values.
*/}}
{{- define "labeller.config" -}}
{{- $kinds := list }}
{{- range (include "labeller.kinds" . | fromYaml).kinds }}
{{- $kinds = append $kinds .config }}
{{- end }}
{{- with .Values.labels }}
{{- dict "labels" . | toYaml }}
{{- end }}
{{- with .Values.annotations }}
{{ dict "annotations" . | toYaml }}
{{- end }}
conflicts: {{ .Values.conflicts }}
{{- if .Values.allowProtectedPrefixes }}
allowProtectedPrefixes: true
{{- end }}
{{- with .Values.ownerKinds }}
ownerKinds:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.sources }}
{{- /* fileFrom is the chart's: what to mount at the file's folder. */}}
{{- $sources := dict }}
{{- range $name, $source := . }}
{{- $_ := set $sources $name (omit $source "fileFrom") }}
{{- end }}
sources:
  {{- toYaml $sources | nindent 2 }}
{{- end }}
kinds:
  {{- toYaml $kinds | nindent 2 }}
{{- end }}

{{/*
RBAC rules from a map of API group → resource plurals: list/watch/patch, nothing more (labeller never reads one object by name).
*/}}
{{- define "labeller.rules" -}}
{{- range $group := keys . | sortAlpha }}
- apiGroups: [{{ $group | quote }}]
  {{- /* "*", the every-kind entry's, is quoted: a bare * is YAML's alias syntax. */}}
  resources: [{{ get $ $group | uniq | sortAlpha | join ", " | replace "*" "\"*\"" }}]
  verbs: [list, watch, patch]
{{- end }}
{{- end }}

{{/*
Kubernetes Events (when on): create a series' Event, patch its count. Goes into the ClusterRole
when there is one, else into each namespace's Role (and a Role in the release namespace for
Events on labeller's Pod).
*/}}
{{- define "labeller.eventRules" -}}
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end }}

{{/*
RBAC rules from a map of API group → resource plurals, for related objects templates read:
list and watch only (labeller never GETs them).
*/}}
{{- define "labeller.readRules" -}}
{{- range $group := keys . | sortAlpha }}
- apiGroups: [{{ $group | quote }}]
  resources: [{{ get $ $group | uniq | sortAlpha | join ", " }}]
  verbs: [list, watch]
{{- end }}
{{- end }}

{{/*
The controllers of built-in kinds (`resource.group` → what its objects' controller
ownerReferences point at): the workload chain labeller follows, so that `owner.*` and `root.*`
get read access to exactly those. A mirror pod's Node is not in it: labeller holds the labels
that read it. Other owner kinds (an operator's custom resources) are named in `ownerKinds`.
*/}}
{{- define "labeller.builtinOwners" -}}
pods: [replicasets.apps, statefulsets.apps, daemonsets.apps, jobs.batch, replicationcontrollers]
replicasets.apps: [deployments.apps]
jobs.batch: [cronjobs.batch]
{{- end }}

{{/*
Where the kinds need rights, as YAML: {cluster: {group: [plurals]}, namespaces: {ns: {group:
[plurals]}}, clusterRead, namespacesRead (the same, read-only, for related objects), and
namespaceNames: the namespaces whose labels templates read in namespaced mode}.
Kinds watched in all namespaces (and cluster-scoped ones) go to the ClusterRole; kinds watched in
given namespaces (their own `namespaces`, or `watchNamespaces`) to a Role in each. Related
objects are read where the kind is watched: namespaces (`namespace.*`) cluster-wide, or by name
in namespaced mode; owner kinds (`owner.*`: the direct controllers, `root.*`: the whole chain).
*/}}
{{- define "labeller.grants" -}}
{{- $owners := include "labeller.builtinOwners" . | fromYaml }}
{{- $cluster := dict }}
{{- $namespaces := dict }}
{{- $clusterRead := dict }}
{{- $namespacesRead := dict }}
{{- $namespaceNames := list }}
{{- range (include "labeller.kinds" . | fromYaml).kinds }}
{{- $kind := . }}
{{- if not .namespaces }}
{{- $_ := set $cluster .group (append (get $cluster .group | default list) .plural) }}
{{- end }}
{{- range .namespaces }}
{{- $groups := get $namespaces . | default dict }}
{{- $_ := set $groups $kind.group (append (get $groups $kind.group | default list) $kind.plural) }}
{{- $_ := set $namespaces . $groups }}
{{- end }}
{{- /* Related resources it reads, as plural.group ids. */}}
{{- $read := list }}
{{- if and .reads.namespace (not .namespaces) }}
{{- $read = append $read "namespaces" }}
{{- else if .reads.namespace }}
{{- $namespaceNames = concat $namespaceNames .namespaces }}
{{- end }}
{{- if or .reads.owner .reads.root }}
{{- $level := concat (get $owners (printf "%s.%s" .plural .group | trimSuffix ".") | default list) $.Values.ownerKinds }}
{{- $read = concat $read $level }}
{{- if .reads.root }}
{{- range until 3 }}
{{- $next := list }}
{{- range $level }}
{{- $next = concat $next (get $owners . | default list) }}
{{- end }}
{{- $read = concat $read $next }}
{{- $level = $next }}
{{- end }}
{{- end }}
{{- end }}
{{- range $id := $read | uniq }}
{{- $plural := regexReplaceAll "\\..*$" $id "" }}
{{- $group := trimPrefix (printf "%s." $plural) $id | trimPrefix $plural }}
{{- if not $kind.namespaces }}
{{- $_ := set $clusterRead $group (append (get $clusterRead $group | default list) $plural) }}
{{- end }}
{{- range $kind.namespaces }}
{{- $groups := get $namespacesRead . | default dict }}
{{- $_ := set $groups $group (append (get $groups $group | default list) $plural) }}
{{- $_ := set $namespacesRead . $groups }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml (dict "cluster" $cluster "namespaces" $namespaces "clusterRead" $clusterRead "namespacesRead" $namespacesRead "namespaceNames" ($namespaceNames | uniq | sortAlpha)) }}
{{- end }}

{{/*
Checks across values that the schema cannot express.
*/}}
{{- define "labeller.validate" -}}
{{- if not .Values.kinds }}
{{- fail "kinds: no kinds to label. Say what to label, e.g. `--set kinds[0].resource=deployments --set labels.team=platform`, or `-f chart/examples/cluster-wide.yaml` (see values.yaml)" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicaCount is %d but leaderElection.enabled is false: every replica would write. Turn leader election on (or use one replica)" (int .Values.replicaCount)) }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
{{- $lease := include "labeller.seconds" .Values.leaderElection.leaseDuration | float64 }}
{{- $renew := include "labeller.seconds" .Values.leaderElection.renewDeadline | float64 }}
{{- $retry := include "labeller.seconds" .Values.leaderElection.retryPeriod | float64 }}
{{- if not (and (gt $lease $renew) (gt $renew $retry)) }}
{{- fail (printf "leaderElection: need leaseDuration > renewDeadline > retryPeriod, got %s, %s, %s" .Values.leaderElection.leaseDuration .Values.leaderElection.renewDeadline .Values.leaderElection.retryPeriod) }}
{{- end }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.service.enabled: the ServiceMonitor scrapes through the Service" }}
{{- end }}
{{- $_ := include "labeller.kinds" . }}
{{- end }}

{{/*
The subjects of every binding: the chart's ServiceAccount.
*/}}
{{- define "labeller.subjects" -}}
- kind: ServiceAccount
  name: {{ include "labeller.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
The leader-election flags of the Deployment, and of the cleanup Job, which waits for the same
Lease so that it never prunes while a labeller pod may still write.
*/}}
{{- define "labeller.leaderElectionArgs" -}}
{{- with .Values.leaderElection }}
{{- if .enabled }}
- --leader-elect
- --leader-elect-resource-namespace={{ $.Release.Namespace }}
- --leader-elect-resource-name={{ include "labeller.leaseName" $ }}
- --leader-elect-lease-duration={{ .leaseDuration }}
- --leader-elect-renew-deadline={{ .renewDeadline }}
- --leader-elect-retry-period={{ .retryPeriod }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The annotations of the cleanup hook's objects: post-delete, in weight order (its ServiceAccount,
RBAC and ConfigMap before the Job), deleted together once every hook succeeded, and before a new
uninstall creates them again. A failed Job and its RBAC stay for inspection.
*/}}
{{- define "labeller.cleanupHook" -}}
helm.sh/hook: post-delete
helm.sh/hook-weight: {{ .weight | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}
