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

{{- define "labeller.shardGroup" -}}
{{- .Values.sharding.group | default (include "labeller.fullname" .) }}
{{- end }}

{{- define "labeller.configPath" -}}
/etc/labeller/kinds.yaml
{{- end }}

{{- define "labeller.configMapName" -}}
{{- .Values.existingConfigMap | default (include "labeller.fullname" .) }}
{{- end }}

{{/*
The Secret holding the sources' memory key (key `key`), mounted for --sources-memory-key-file:
sourcesMemory.existingSecret, else the chart's own, made when the config may have sources
(`sources`, or a ConfigMap of your own); empty: none, and the memory keeps key counts only.
*/}}
{{- define "labeller.sourcesMemorySecret" -}}
{{- if .Values.sourcesMemory.existingSecret }}
{{- .Values.sourcesMemory.existingSecret }}
{{- else if or .Values.sources .Values.existingConfigMap }}
{{- printf "%s-sources-memory" (include "labeller.fullname" .) }}
{{- end }}
{{- end }}

{{- define "labeller.sourcesMemoryFolder" -}}
/var/run/secrets/labeller/sources-memory
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
Kubernetes' built-in resources (as of 1.37) that can be listed, watched and patched, so that
their kinds need no `group`: plural → group, the other names kubectl accepts (singular =
lowercase kind, short names) and whether cluster-scoped. Everything else needs `group` (and
`scope: Cluster` when cluster-scoped). Left out: what labeller's every-kind mode leaves out by
default (src/config/everykind.ts: events, leases, endpoints, endpoint slices, controller
revisions, CSI storage capacities, API services, flow control), which nobody labels by
accident.

The every-kind grant is this table, in the entry's scope, but the `sensitive` kinds: reading
them reads credentials, or patching them does (Secrets' data; a webhook configuration or an
admission policy pointed at Secrets, or with a Secret as its parameter; a CRD's conversion
webhook receives its objects). The every-kind entry leaves them out, and the chart adds them
to its `exclude` in the ConfigMap so that labeller agrees; a kind listed by name grants one.
*/}}
{{- define "labeller.builtinResources" -}}
configmaps: {group: "", names: [configmap, cm]}
limitranges: {group: "", names: [limitrange, limits]}
namespaces: {group: "", names: [namespace, ns], clusterScoped: true}
nodes: {group: "", names: [node, "no"], clusterScoped: true}
persistentvolumeclaims: {group: "", names: [persistentvolumeclaim, pvc]}
persistentvolumes: {group: "", names: [persistentvolume, pv], clusterScoped: true}
pods: {group: "", names: [pod, po]}
podtemplates: {group: "", names: [podtemplate]}
replicationcontrollers: {group: "", names: [replicationcontroller, rc]}
resourcequotas: {group: "", names: [resourcequota, quota]}
secrets: {group: "", names: [secret], sensitive: true}
serviceaccounts: {group: "", names: [serviceaccount, sa]}
services: {group: "", names: [service, svc]}
mutatingadmissionpolicies: {group: admissionregistration.k8s.io, names: [mutatingadmissionpolicy], clusterScoped: true, sensitive: true}
mutatingadmissionpolicybindings: {group: admissionregistration.k8s.io, names: [mutatingadmissionpolicybinding], clusterScoped: true, sensitive: true}
mutatingwebhookconfigurations: {group: admissionregistration.k8s.io, names: [mutatingwebhookconfiguration], clusterScoped: true, sensitive: true}
validatingadmissionpolicies: {group: admissionregistration.k8s.io, names: [validatingadmissionpolicy], clusterScoped: true, sensitive: true}
validatingadmissionpolicybindings: {group: admissionregistration.k8s.io, names: [validatingadmissionpolicybinding], clusterScoped: true, sensitive: true}
validatingwebhookconfigurations: {group: admissionregistration.k8s.io, names: [validatingwebhookconfiguration], clusterScoped: true, sensitive: true}
customresourcedefinitions: {group: apiextensions.k8s.io, names: [customresourcedefinition, crd, crds], clusterScoped: true, sensitive: true}
daemonsets: {group: apps, names: [daemonset, ds]}
deployments: {group: apps, names: [deployment, deploy]}
replicasets: {group: apps, names: [replicaset, rs]}
statefulsets: {group: apps, names: [statefulset, sts]}
horizontalpodautoscalers: {group: autoscaling, names: [horizontalpodautoscaler, hpa]}
cronjobs: {group: batch, names: [cronjob, cj]}
jobs: {group: batch, names: [job]}
certificatesigningrequests: {group: certificates.k8s.io, names: [certificatesigningrequest, csr], clusterScoped: true}
clustertrustbundles: {group: certificates.k8s.io, names: [clustertrustbundle], clusterScoped: true}
podcertificaterequests: {group: certificates.k8s.io, names: [podcertificaterequest]}
ingressclasses: {group: networking.k8s.io, names: [ingressclass], clusterScoped: true}
ingresses: {group: networking.k8s.io, names: [ingress, ing]}
ipaddresses: {group: networking.k8s.io, names: [ipaddress, ip], clusterScoped: true}
networkpolicies: {group: networking.k8s.io, names: [networkpolicy, netpol]}
servicecidrs: {group: networking.k8s.io, names: [servicecidr], clusterScoped: true}
runtimeclasses: {group: node.k8s.io, names: [runtimeclass], clusterScoped: true}
poddisruptionbudgets: {group: policy, names: [poddisruptionbudget, pdb]}
clusterrolebindings: {group: rbac.authorization.k8s.io, names: [clusterrolebinding], clusterScoped: true}
clusterroles: {group: rbac.authorization.k8s.io, names: [clusterrole], clusterScoped: true}
rolebindings: {group: rbac.authorization.k8s.io, names: [rolebinding]}
roles: {group: rbac.authorization.k8s.io, names: [role]}
deviceclasses: {group: resource.k8s.io, names: [deviceclass], clusterScoped: true}
devicetaintrules: {group: resource.k8s.io, names: [devicetaintrule], clusterScoped: true}
resourceclaims: {group: resource.k8s.io, names: [resourceclaim]}
resourceclaimtemplates: {group: resource.k8s.io, names: [resourceclaimtemplate]}
resourceslices: {group: resource.k8s.io, names: [resourceslice], clusterScoped: true}
priorityclasses: {group: scheduling.k8s.io, names: [priorityclass, pc], clusterScoped: true}
csidrivers: {group: storage.k8s.io, names: [csidriver], clusterScoped: true}
csinodes: {group: storage.k8s.io, names: [csinode], clusterScoped: true}
storageclasses: {group: storage.k8s.io, names: [storageclass, sc], clusterScoped: true}
volumeattachments: {group: storage.k8s.io, names: [volumeattachment], clusterScoped: true}
volumeattributesclasses: {group: storage.k8s.io, names: [volumeattributesclass, vac], clusterScoped: true}
storageversionmigrations: {group: storagemigration.k8s.io, names: [storageversionmigration], clusterScoped: true}
{{- end }}

{{/*
A kubectl-style resource name (`deploy`, `Deployment`, `deployments.apps`,
`deployments.v1.apps`) split up, as YAML {name, version, group, qualified}.
*/}}
{{- define "labeller.parseResource" -}}
{{- $parts := splitList "." . }}
{{- $qualifiers := rest $parts }}
{{- $version := "" }}
{{- if and $qualifiers (regexMatch "^v[0-9]+((alpha|beta)[0-9]+)?$" (first $qualifiers)) }}
{{- $version = first $qualifiers }}
{{- $qualifiers = rest $qualifiers }}
{{- end }}
{{- toYaml (dict "name" (first $parts) "version" $version "group" (join "." $qualifiers) "qualified" (gt (len $parts) 1)) }}
{{- end }}

{{/*
The plural of the built-in (labeller.builtinResources) that a parsed name (labeller.parseResource)
names, by any of its names and in its group when qualified; empty when it names none.
*/}}
{{- define "labeller.builtin" -}}
{{- $name := lower .name }}
{{- range $candidate, $builtin := include "labeller.builtinResources" . | fromYaml }}
{{- if and (or (eq $name $candidate) (has $name $builtin.names)) (or (not $.qualified) (eq $.group $builtin.group)) }}
{{- $candidate }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The related objects a list of templates reads, as YAML {namespace, owner, root: bool}, parsed as
labeller parses them (src/config/template.ts): in each {{…}}, the variable before any `|`
filter, or a lookup's key (`teams[namespace.labels.team].costCenter`) reads the relation it
starts with (`namespace.`, `owner.`, `root.`). `{{namespace}}` is the object's own namespace.
*/}}
{{- define "labeller.templateReads" -}}
{{- $reads := dict "namespace" false "owner" false "root" false }}
{{- $references := list }}
{{- range $template := .templates }}
{{- range regexFindAll "\\{\\{.*?\\}\\}" (toString $template) -1 }}
{{- $variable := trimPrefix "{{" . | trimSuffix "}}" | regexFind "^[^|]*" | trim }}
{{- $variable = regexReplaceAll "^[a-z][-a-z0-9]*\\[(.*)\\](\\.[^\\]]*)?$" $variable "${1}" | trim }}
{{- range $relation := keys $reads }}
{{- if hasPrefix (printf "%s." $relation) $variable }}
{{- $_ := set $reads $relation true }}
{{- end }}
{{- end }}
{{- range $name := $.references }}
{{- if hasPrefix (printf "%s." $name) $variable }}
{{- $references = append $references $name }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $_ := set $reads "references" ($references | uniq | sortAlpha) }}
{{- toYaml $reads }}
{{- end }}

{{/*
The references templates may read, as YAML {name: {resource: plural.group, clusterScoped, anyNamespace}}:
the built-in ones (labeller's src/config/references.ts) and `references`. resource is the kind read:
a forward reference's `to`, a reverse one's `from` (plural.group, or a built-in by any of its
names). anyNamespace: the object it names may be in another namespace than the labelled one (a
`namespaceField`), so it is read cluster-wide; a reverse reference's objects are in the labelled
object's namespace.
*/}}
{{- define "labeller.references" -}}
{{- $builtins := include "labeller.builtinResources" . | fromYaml }}
{{- $references := dict
  "node" (dict "resource" "nodes" "clusterScoped" true "anyNamespace" false)
  "serviceAccount" (dict "resource" "serviceaccounts" "clusterScoped" false "anyNamespace" false)
  "claim" (dict "resource" "persistentvolumeclaims" "clusterScoped" false "anyNamespace" true)
  "volume" (dict "resource" "persistentvolumes" "clusterScoped" true "anyNamespace" false)
  "scaler" (dict "resource" "horizontalpodautoscalers.autoscaling" "clusterScoped" false "anyNamespace" false)
  "mountedBy" (dict "resource" "pods" "clusterScoped" false "anyNamespace" false) }}
{{- range $name, $reference := .Values.references }}
{{- $where := printf "references.%s" $name }}
{{- if hasKey $references $name }}
{{- fail (printf "%s: %q is a built-in reference: give yours another name" $where $name) }}
{{- end }}
{{- $read := ternary $reference.from $reference.to (not (empty $reference.from)) }}
{{- if not $read }}
{{- fail (printf "%s: `to` (the kind the field names) or `from` (the kind whose field names the labelled object) is required, as plural.group (e.g. backuppolicies.example.com)" $where) }}
{{- end }}
{{- $parsed := include "labeller.parseResource" $read | fromYaml }}
{{- $plural := include "labeller.builtin" $parsed }}
{{- $clusterScoped := false }}
{{- if $plural }}
{{- $plural = printf "%s.%s" $plural (get $builtins $plural).group | trimSuffix "." }}
{{- $clusterScoped = (get $builtins (include "labeller.builtin" $parsed)).clusterScoped | default false }}
{{- else }}
{{- if not $parsed.qualified }}
{{- fail (printf "%s: the chart does not know the API group of %q, so it cannot grant reading it: write its plural.group, e.g. backuppolicies.example.com" $where $read) }}
{{- end }}
{{- $plural = printf "%s.%s" $parsed.name $parsed.group }}
{{- $clusterScoped = eq ($reference.scope | default "Namespaced") "Cluster" }}
{{- end }}
{{- $_ := set $references $name (dict "resource" $plural "clusterScoped" $clusterScoped "anyNamespace" (not (empty $reference.namespaceField))) }}
{{- end }}
{{- toYaml $references }}
{{- end }}

{{/*
The configured kinds, resolved for RBAC and for labeller, as YAML {kinds: [...]}; each item:
  plural, group, clusterScoped  the resource
  every                         whether it is the every-kind entry
  sensitive                     the every-kind entry's: the sensitive built-ins it does not grant
  grants                        {group: [plurals]}: what labeller may list, watch and patch for it
  namespaces                    the namespaces the kind is watched in (empty: all)
  reads                         {namespace, owner, root}: the related objects its label and
                                annotation templates read (labeller.templateReads)
  config                        the kinds.yaml entry: without the chart-only fields, `resource`
                                qualified with its group (`deployments.apps`, `widgets.example.com`)
                                so that labeller resolves exactly what RBAC grants.
The every-kind entry (`resource: "*"`, with labeller's own `scope` and `exclude`, and the
chart's `groups`) grants the built-ins of its scope but the sensitive ones and those its
`exclude` names (RBAC has no "all but": they are enumerated), and "*" in each of its `groups`
(custom resources: RBAC cannot name a group it does not know). In a ClusterRole unless its scope
is namespaced and it has namespaces (its own, or watchNamespaces), then in a Role in each of
them. The sensitive built-ins of its scope that no kind lists by name are added to its
`exclude` in the ConfigMap, so that labeller does not try, and report, kinds it may not use.
Fails with a message that says what to write for an unknown resource, a duplicate and a kind
without labels.
*/}}
{{- define "labeller.kinds" -}}
{{- $builtins := include "labeller.builtinResources" . | fromYaml }}
{{- $builtinGroups := dict }}
{{- range $builtins }}
{{- $_ := set $builtinGroups .group true }}
{{- end }}
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
{{- $grants := dict }}
{{- $sensitive := list }}
{{- if $every }}
{{- if hasKey $kind "group" }}
{{- fail (printf "%s: the every-kind entry covers the built-in API groups: remove `group`; name custom resources' groups in `groups`" $where) }}
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
{{- $excluded := list }}
{{- range $kind.exclude }}
{{- $excluded = append $excluded (include "labeller.builtin" (include "labeller.parseResource" . | fromYaml)) }}
{{- end }}
{{- range $candidate, $builtin := $builtins }}
{{- $inScope := or (eq $scope "all") (eq (eq $scope "cluster") ($builtin.clusterScoped | default false)) }}
{{- if and $inScope (not (has $candidate $excluded)) }}
{{- if $builtin.sensitive }}
{{- $sensitive = append $sensitive (printf "%s.%s" $candidate $builtin.group | trimSuffix ".") }}
{{- else }}
{{- $_ := set $grants $builtin.group (append (get $grants $builtin.group | default list) $candidate) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $kind.groups }}
{{- if hasKey $builtinGroups . }}
{{- fail (printf "%s: groups: %s is a built-in group, whose kinds the every-kind entry grants already (but the sensitive ones: list one by name to grant it, e.g. `resource: secrets`): remove it" $where .) }}
{{- end }}
{{- $_ := set $grants . (list "*") }}
{{- end }}
{{- else }}
{{- range list "exclude" "groups" }}
{{- if hasKey $kind . }}
{{- fail (printf "%s: only the every-kind entry (resource: \"*\") takes `%s`: remove it" $where .) }}
{{- end }}
{{- end }}
{{- if and $kind.scope (not (has $kind.scope (list "Namespaced" "Cluster"))) }}
{{- fail (printf "%s: scope %s is for the every-kind entry (resource: \"*\"); a kind's own scope, for RBAC, is Namespaced or Cluster" $where $kind.scope) }}
{{- end }}
{{- $parsed := include "labeller.parseResource" $kind.resource | fromYaml }}
{{- $name := $parsed.name }}
{{- $version = $parsed.version }}
{{- $group = $parsed.group }}
{{- if hasKey $kind "group" }}
{{- if $parsed.qualified }}
{{- fail (printf "%s: give the API group once: either `resource: %s` with `group: %s`, or `resource: %s.%s` without `group`" $where $name $kind.group $name $kind.group) }}
{{- end }}
{{- $_ := set $parsed "qualified" true }}
{{- $_ := set $parsed "group" $kind.group }}
{{- $group = $kind.group }}
{{- end }}
{{- /* A built-in the chart knows, by any of its names (in the given group, if any)? */}}
{{- $clusterScoped = eq ($kind.scope | default "Namespaced") "Cluster" }}
{{- with include "labeller.builtin" $parsed }}
{{- $plural = . }}
{{- $group = (get $builtins .).group }}
{{- $clusterScoped = (get $builtins .).clusterScoped | default false }}
{{- end }}
{{- if not $plural }}
{{- if not $parsed.qualified }}
{{- fail (printf "%s: the chart does not know the API group of %q, so it cannot grant RBAC for it. For a custom resource, add its group and write its plural: `resource: %s` with `group: example.com` (see `kubectl api-resources`). Known without group: %s" $where $name $name (keys $builtins | sortAlpha | join ", ")) }}
{{- end }}
{{- if ne $name (lower $name) }}
{{- fail (printf "%s: write the resource's plural name in lowercase (e.g. %q), not its kind: RBAC rules name plurals (see `kubectl api-resources`)" $where (printf "%ss" (lower $name))) }}
{{- end }}
{{- $plural = $name }}
{{- end }}
{{- $_ := set $grants $group (list $plural) }}
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
{{- $reads := include "labeller.templateReads" (dict "templates" (concat (values $effective) (values $annotations)) "references" (keys (include "labeller.references" $ | fromYaml))) | fromYaml }}
{{- $resource := $plural }}
{{- if and $group (not $every) }}
{{- $resource = printf "%s.%s" $plural (list $version $group | compact | join ".") }}
{{- end }}
{{- /* The every-kind entry's scope is labeller's own; other kinds' scope is the chart's. */}}
{{- $config := ternary (omit $kind "group" "groups") (omit $kind "group" "scope") $every }}
{{- $_ := set $config "resource" $resource }}
{{- $kinds = append $kinds (dict "plural" $plural "group" $group "clusterScoped" $clusterScoped "every" $every "grants" $grants "sensitive" $sensitive "namespaces" $namespaces "config" $config "reads" $reads) }}
{{- end }}
{{- /* Sensitive kinds the every-kind entry does not grant, unless listed by name: labeller leaves them out too. */}}
{{- range $kinds }}
{{- $exclude := .config.exclude | default list }}
{{- range .sensitive }}
{{- if not (hasKey $seen .) }}
{{- $exclude = append $exclude . }}
{{- end }}
{{- end }}
{{- if $exclude }}
{{- $_ := set .config "exclude" $exclude }}
{{- end }}
{{- end }}
{{- toYaml (dict "kinds" $kinds) }}
{{- end }}

{{/*
labeller's config file: the kinds.yaml part of the values.
*/}}
{{/*
kinds.yaml as the release's ConfigMap (and the cleanup's) carries it: the config, and with
sharding the release's revision as its generation, which tells the newer of two configs while a
change reaches the shard members. Not in the pods' checksum (labeller.config): an upgrade that
keeps the config rolls nothing.
*/}}
{{- define "labeller.configFile" -}}
{{ include "labeller.config" . | trim }}
{{- if .Values.sharding.enabled }}
generation: {{ .Release.Revision }}
{{- end }}
{{- end }}

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
{{- with .Values.protect }}
{{- if .mode }}
{{- if not $.Values.admissionPolicies.enabled }}
{{- fail "protect.mode needs admissionPolicies.enabled: the API server enforces protection with the policies the controller keeps applied" }}
{{- end }}
protect:
  mode: {{ .mode }}
  {{- with .keys }}
  keys:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .allow }}
  allow:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}
{{- if .Values.allowProtectedPrefixes }}
allowProtectedPrefixes: true
{{- end }}
{{- with .Values.ownerKinds }}
ownerKinds:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.references }}
{{- /* scope is the chart's: whether a custom kind a reference names is cluster-scoped, for RBAC. */}}
{{- $references := dict }}
{{- range $name, $reference := . }}
{{- $_ := set $references $name (omit $reference "scope") }}
{{- end }}
references:
  {{- toYaml $references | nindent 2 }}
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
[plurals]}}, clusterRead, namespacesRead (the same, read-only, for related objects),
namespaceNames: the namespaces whose labels templates read in namespaced mode, and every:
{cluster, namespaces}: where the every-kind entry's grant goes}.
Kinds watched in all namespaces (and cluster-scoped ones) go to the ClusterRole; kinds watched in
given namespaces (their own `namespaces`, or `watchNamespaces`) to a Role in each. Related
objects are read where the kind is watched: namespaces (`namespace.*`) cluster-wide, or by name
in namespaced mode; owner kinds (`owner.*`: the direct controllers, `root.*`: the whole chain).
*/}}
{{- define "labeller.grants" -}}
{{- $owners := include "labeller.builtinOwners" . | fromYaml }}
{{- $references := include "labeller.references" . | fromYaml }}
{{- $referencesRead := dict }}
{{- $cluster := dict }}
{{- $namespaces := dict }}
{{- $clusterRead := dict }}
{{- $namespacesRead := dict }}
{{- $namespaceNames := list }}
{{- $every := dict "cluster" false "namespaces" list }}
{{- range (include "labeller.kinds" . | fromYaml).kinds }}
{{- $kind := . }}
{{- range $group, $plurals := .grants }}
{{- if not $kind.namespaces }}
{{- $_ := set $cluster $group (concat (get $cluster $group | default list) $plurals) }}
{{- end }}
{{- range $kind.namespaces }}
{{- $groups := get $namespaces . | default dict }}
{{- $_ := set $groups $group (concat (get $groups $group | default list) $plurals) }}
{{- $_ := set $namespaces . $groups }}
{{- end }}
{{- end }}
{{- if .every }}
{{- $_ := set $every "cluster" (not .namespaces) }}
{{- $_ := set $every "namespaces" .namespaces }}
{{- end }}
{{- /* Related resources it reads, as plural.group ids. */}}
{{- $read := list }}
{{- if and .reads.namespace (not .namespaces) }}
{{- $read = append $read "namespaces" }}
{{- else if .reads.namespace }}
{{- $namespaceNames = concat $namespaceNames .namespaces }}
{{- end }}
{{- if or .reads.owner .reads.root }}
{{- /* The every-kind entry covers every kind with an owner in the chain. */}}
{{- $level := list }}
{{- if .every }}
{{- range $owners }}
{{- $level = concat $level . }}
{{- end }}
{{- else }}
{{- $level = get $owners (printf "%s.%s" .plural .group | trimSuffix ".") | default list }}
{{- end }}
{{- $level = concat $level $.Values.ownerKinds }}
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
{{- /* What references name: cluster-wide when cluster-scoped or in any namespace, else where the kind is. */}}
{{- range $name := .reads.references }}
{{- $reference := get $references $name }}
{{- if or $reference.clusterScoped $reference.anyNamespace (not $kind.namespaces) }}
{{- $plural := regexReplaceAll "\\..*$" $reference.resource "" }}
{{- $group := trimPrefix (printf "%s." $plural) $reference.resource | trimPrefix $plural }}
{{- $_ := set $referencesRead $group (append (get $referencesRead $group | default list) $plural) }}
{{- else }}
{{- $read = append $read $reference.resource }}
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
{{- toYaml (dict "cluster" $cluster "namespaces" $namespaces "clusterRead" $clusterRead "referencesRead" $referencesRead "namespacesRead" $namespacesRead "namespaceNames" ($namespaceNames | uniq | sortAlpha) "every" $every) }}
{{- end }}

{{/*
The file sources' volumes and mounts, as YAML {volumes, mounts}: one projected volume per folder,
mounted read-only there, holding each source's file from the key of its ConfigMap or Secret named
as the file, so that sources share a folder. Optional, as a missing key was when the whole object
was mounted: a file not there yet is a source labeller reports as not loaded, not a pod that
cannot start. Fails, naming the sources and the fix, where two
mounts would collide (the API server refuses two at one path, and nothing can be mounted inside
a read-only volume): a file in the config's folder, one file from two places, a folder inside
another source's, an extra mount where the chart mounts one.
*/}}
{{- define "labeller.sourceMounts" -}}
{{- $configFolder := include "labeller.configPath" . | dir }}
{{- $keyFolder := ternary (include "labeller.sourcesMemoryFolder" .) "" (not (empty (include "labeller.sourcesMemorySecret" .))) }}
{{- /* folder → {owner: the first source there, its file, projections}; file → {owner, from} */}}
{{- $folders := dict }}
{{- $files := dict }}
{{- range $name, $source := .Values.sources }}
{{- with $source.fileFrom }}
{{- $where := printf "sources.%s" $name }}
{{- $type := ternary "configMap" "secret" (not (empty .configMap)) }}
{{- if not $source.file }}
{{- fail (printf "%s: fileFrom mounts the file a `file` source reads: add `file: /path/to/<key>`, where <key> is the key of %s %s that holds it" $where $type (get . $type)) }}
{{- end }}
{{- if not (isAbs $source.file) }}
{{- fail (printf "%s: file %s: give an absolute path, e.g. /etc/labeller-sources/%s: the chart mounts the file's folder" $where $source.file (base $source.file)) }}
{{- end }}
{{- $file := clean $source.file }}
{{- $folder := dir $file }}
{{- if eq $folder "/" }}
{{- fail (printf "%s: file %s: give it a folder of its own, e.g. /etc/labeller-sources%s: the chart mounts the file's folder" $where $file $file) }}
{{- end }}
{{- if or (eq $folder $configFolder) (hasPrefix (printf "%s/" $configFolder) $folder) }}
{{- fail (printf "%s: file %s is in %s, where the chart mounts labeller's config (kinds.yaml): put it in another folder, e.g. %s-sources/%s" $where $file $configFolder $configFolder (base $file)) }}
{{- end }}
{{- if and $keyFolder (or (eq $folder $keyFolder) (hasPrefix (printf "%s/" $keyFolder) $folder)) }}
{{- fail (printf "%s: file %s is in %s, where the chart mounts the sources' memory key: put it in another folder, e.g. /etc/labeller-sources/%s" $where $file $keyFolder (base $file)) }}
{{- end }}
{{- $from := printf "%s %s" $type (get . $type) }}
{{- with get $files $file }}
{{- if ne .from $from }}
{{- fail (printf "%s and %s: both mount %s, from %s and %s: give one of them another file name" .owner $where $file .from $from) }}
{{- end }}
{{- else }}
{{- $_ := set $files $file (dict "owner" $where "from" $from) }}
{{- $at := get $folders $folder | default (dict "owner" $where "file" $file "projections" list) }}
{{- $item := dict "key" (base $file) "path" (base $file) }}
{{- $_ := set $at "projections" (append $at.projections (dict $type (dict "name" (get . $type) "items" (list $item) "optional" true))) }}
{{- $_ := set $folders $folder $at }}
{{- end }}
{{- end }}
{{- end }}
{{- $volumes := list }}
{{- $mounts := list }}
{{- range $folder, $at := $folders }}
{{- range $other, $outer := $folders }}
{{- if hasPrefix (printf "%s/" $other) $folder }}
{{- fail (printf "%s: file %s is in %s, where the chart mounts %s: put both files in one folder, or in folders side by side" $at.owner $at.file $other $outer.owner) }}
{{- end }}
{{- end }}
{{- $volume := printf "source-%s" (trimPrefix "sources." $at.owner) | trunc 63 | trimSuffix "-" }}
{{- $volumes = append $volumes (dict "name" $volume "projected" (dict "sources" $at.projections)) }}
{{- $mounts = append $mounts (dict "name" $volume "mountPath" $folder "readOnly" true) }}
{{- end }}
{{- $owners := dict $configFolder "labeller's config (kinds.yaml)" }}
{{- if $keyFolder }}
{{- $_ := set $owners $keyFolder "the sources' memory key" }}
{{- end }}
{{- range $folder, $at := $folders }}
{{- $_ := set $owners $folder $at.owner }}
{{- end }}
{{- range $i, $mount := .Values.extraVolumeMounts }}
{{- $path := clean $mount.mountPath }}
{{- range $folder, $owner := $owners }}
{{- if or (eq $path $folder) (hasPrefix (printf "%s/" $folder) $path) }}
{{- fail (printf "extraVolumeMounts[%d] (%s) is mounted at %s, where the chart mounts %s%s: mount it elsewhere" $i $mount.name $path $owner (ternary "" (printf " (at %s)" $folder) (eq $path $folder))) }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml (dict "volumes" $volumes "mounts" $mounts) }}
{{- end }}

{{/*
Checks across values that the schema cannot express.
*/}}
{{- define "labeller.validate" -}}
{{- if not .Values.kinds }}
{{- fail "kinds: no kinds to label. Say what to label, e.g. `--set kinds[0].resource=deployments --set labels.team=platform`, or `-f chart/examples/cluster-wide.yaml` (see values.yaml)" }}
{{- end }}
{{- if and .Values.sharding.enabled .Values.leaderElection.enabled }}
{{- fail "sharding.enabled and leaderElection.enabled are both true, and labeller takes one or the other: leader election keeps one replica writing, sharding has every replica write its share. To shard, set leaderElection.enabled=false; else set sharding.enabled=false" }}
{{- end }}
{{- if and .Values.sharding.enabled (not .Values.sharding.group) (not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" (include "labeller.shardGroup" .))) }}
{{- fail (printf "sharding.group: the release's full name %q cannot name the shard group, which names Leases and labels them: set sharding.group to lower-case letters, digits and '-', at most 63 characters" (include "labeller.shardGroup" .)) }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) (not .Values.sharding.enabled) }}
{{- fail (printf "replicaCount is %d but leaderElection.enabled is false: every replica would write. Turn leader election on (one replica writes), or sharding.enabled (each writes its share of the namespaces), or use one replica" (int .Values.replicaCount)) }}
{{- end }}
{{- /* labeller checks the timings whether it elects a leader or shards. */}}
{{- if or .Values.leaderElection.enabled .Values.sharding.enabled }}
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
The sharding flags of the Deployment: each replica a member of the group, its Lease in the
release namespace, timed as leader election would be (labeller checks all three timings in either
mode). And of the cleanup Job: prune with them waits until no member holds its Lease, then prunes
every namespace as one process.
*/}}
{{- define "labeller.shardingArgs" -}}
{{- if .Values.sharding.enabled }}
- --shards=auto
- --shard-group={{ include "labeller.shardGroup" . }}
- --leader-elect-resource-namespace={{ .Release.Namespace }}
- --leader-elect-lease-duration={{ .Values.leaderElection.leaseDuration }}
- --leader-elect-renew-deadline={{ .Values.leaderElection.renewDeadline }}
- --leader-elect-retry-period={{ .Values.leaderElection.retryPeriod }}
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

{{/*
Whether the config protects keys (protect.mode, or a kind's own protect): the release then keeps
ValidatingAdmissionPolicies too. "true" or "".
*/}}
{{- define "labeller.protects" -}}
{{- $protects := .Values.protect.mode }}
{{- range .Values.kinds }}
{{- if .protect }}
{{- $protects = true }}
{{- end }}
{{- end }}
{{- if $protects }}true{{- end }}
{{- end }}

{{/*
The flags that give `labeller status` the controller's scope and identity, as the Deployment
passes them: where it watches, its field manager, Events, admission policies, its Lease or its
shard group. The test hook that runs the permission preflight passes them, and NOTES.txt shows
them, so that both ask for exactly what the controller needs.
*/}}
{{- define "labeller.statusArgs" -}}
{{- with .Values.watchNamespaces }}
- --namespace={{ join "," . }}
{{- end }}
{{- with .Values.selector }}
- --selector={{ . }}
{{- end }}
- --field-manager={{ .Values.fieldManager | default .Release.Name }}
{{- if not .Values.events.enabled }}
- --events=false
{{- end }}
{{- if .Values.admissionPolicies.enabled }}
- --admission-policies
{{- end }}
{{- if .Values.policyReports.enabled }}
- --policy-reports
{{- end }}
{{- include "labeller.leaderElectionArgs" . }}
{{- include "labeller.shardingArgs" . }}
{{- end }}

{{/*
The labels of the test hooks (tests.enabled): the release's, but with app.kubernetes.io/name
`<name>-test` and component `test`, so that nothing that selects the release's pods (the metrics
Service, the PodDisruptionBudget, the NetworkPolicy, spread constraints) selects a test Pod.
*/}}
{{- define "labeller.testLabels" -}}
{{- $labels := include "labeller.labels" . | fromYaml }}
{{- $_ := set $labels "app.kubernetes.io/name" (printf "%s-test" (include "labeller.name" .)) }}
{{- $_ := set $labels "app.kubernetes.io/component" "test" }}
{{- toYaml $labels }}
{{- end }}

{{/*
The annotations of a test hook Pod (`helm test`), run in weight order: deleted before a new run
creates it again and once it passed; a failed one stays for `kubectl logs`, and Helm 4 prints its
logs (hook-output-log-policy). Only Pods are test hooks: `helm test --logs` (Helm 3, and Helm 4
before 4.2) reads every test hook as a Pod with one container.
*/}}
{{- define "labeller.testHook" -}}
helm.sh/hook: test
helm.sh/hook-weight: {{ .weight | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
helm.sh/hook-output-log-policy: hook-failed
{{- end }}

{{/*
The settings every test Pod shares with the Deployment's: where it may run, how it pulls the
image, its pod security context; it never restarts and gets no Service variables.
*/}}
{{- define "labeller.testPodSettings" -}}
restartPolicy: Never
enableServiceLinks: false
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Labels an object needs to match a label selector (best effort, for the admission test's probe):
`k=v` and `k==v` give k=v, `k in (a,b)` gives k=a, `k` gives k=""; `!k`, `k!=v` and `k notin (…)`
hold for an object without k. As YAML.
*/}}
{{- define "labeller.labelsMatching" -}}
{{- $labels := dict }}
{{- range regexFindAll "([^,(]|\\([^)]*\\))+" (toString .) -1 }}
{{- $term := trim . }}
{{- if or (not $term) (hasPrefix "!" $term) (contains "!=" $term) (regexMatch "^\\S+\\s+notin\\s*\\(" $term) }}
{{- else if regexMatch "^\\S+\\s+in\\s*\\(" $term }}
{{- $key := regexFind "^\\S+" $term }}
{{- $values := regexReplaceAll "^\\S+\\s+in\\s*\\((.*)\\)$" $term "${1}" }}
{{- $_ := set $labels $key (splitList "," $values | first | trim) }}
{{- else if contains "=" $term }}
{{- $_ := set $labels (regexReplaceAll "^([^=]*)=.*$" $term "${1}" | trim) (regexReplaceAll "^[^=]*==?(.*)$" $term "${1}" | trim) }}
{{- else }}
{{- $_ := set $labels $term "" }}
{{- end }}
{{- end }}
{{- toYaml $labels }}
{{- end }}

{{/*
The admission test's probe (tests.enabled with admissionPolicies.enabled), as YAML {resource,
kind, namespace, object, expected}, or {} when there is none to make: the first of ConfigMaps
and ServiceAccounts (namespaced, created with a name alone, and not sensitive) that a kind entry
labels, named or through the every-kind entry; in the release namespace if the entry watches it,
else in the first it watches; with the labels its selector needs; `expected`, the labels the
policies must set on it that the chart can tell beforehand: constants, and templates of only
{{name}}, {{namespace}}, {{kind}}, {{resource}} and {{group}} (as rendered by CEL, in
admission/cel.ts), whose value is a valid label value and not one the probe already carries.
None when nothing is expected, with existingConfigMap (the config is not the chart's), with
dryRun (policies applied in a dry run are not in force), or without rbac.create (the test's own
Role).
*/}}
{{- define "labeller.testProbe" -}}
{{- $probe := dict }}
{{- if and .Values.admissionPolicies.enabled .Values.rbac.create (not .Values.existingConfigMap) (not .Values.dryRun) }}
{{- $kinds := (include "labeller.kinds" . | fromYaml).kinds }}
{{- $found := dict }}
{{- range $resource := list "configmaps" "serviceaccounts" }}
{{- range $kinds }}
{{- if and (not $found.kind) (not .every) (eq .plural $resource) (eq .group "") }}
{{- $_ := set $found "kind" . }}
{{- $_ := set $found "resource" $resource }}
{{- end }}
{{- end }}
{{- range $kinds }}
{{- if and (not $found.kind) .every (has $resource (get .grants "" | default list)) }}
{{- $_ := set $found "kind" . }}
{{- $_ := set $found "resource" $resource }}
{{- end }}
{{- end }}
{{- end }}
{{- with $found.kind }}
{{- $resource := $found.resource }}
{{- $kindName := get (dict "configmaps" "ConfigMap" "serviceaccounts" "ServiceAccount") $resource }}
{{- $namespace := $.Release.Namespace }}
{{- if and .namespaces (not (has $namespace .namespaces)) }}
{{- $namespace = first .namespaces }}
{{- end }}
{{- $name := "labeller-helm-test-probe" }}
{{- $labels := include "labeller.labelsMatching" (.config.selector | default $.Values.selector) | fromYaml }}
{{- $effective := deepCopy ($.Values.labels | default dict) }}
{{- range $key, $value := .config.labels }}
{{- if kindIs "invalid" $value }}
{{- $_ := unset $effective $key }}
{{- else }}
{{- $_ := set $effective $key $value }}
{{- end }}
{{- end }}
{{- $expected := dict }}
{{- range $key, $template := $effective }}
{{- $value := toString $template }}
{{- $value = regexReplaceAll "\\{\\{\\s*name\\s*\\}\\}" $value $name }}
{{- $value = regexReplaceAll "\\{\\{\\s*namespace\\s*\\}\\}" $value $namespace }}
{{- $value = regexReplaceAll "\\{\\{\\s*kind\\s*\\}\\}" $value $kindName }}
{{- $value = regexReplaceAll "\\{\\{\\s*resource\\s*\\}\\}" $value $resource }}
{{- $value = regexReplaceAll "\\{\\{\\s*group\\s*\\}\\}" $value "" }}
{{- if and (not (contains "{{" $value)) (le (len $value) 63) (regexMatch "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$" $value) (not (hasKey $labels $key)) }}
{{- $_ := set $expected $key $value }}
{{- end }}
{{- end }}
{{- if $expected }}
{{- $metadata := dict "name" $name "namespace" $namespace }}
{{- if $labels }}
{{- $_ := set $metadata "labels" $labels }}
{{- end }}
{{- $object := dict "apiVersion" "v1" "kind" $kindName "metadata" $metadata }}
{{- $probe = dict "resource" $resource "kind" $kindName "namespace" $namespace "object" $object "expected" $expected }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $probe }}
{{- end }}

{{/*
The annotation in which the field manager's admission policies list the labels they set
(labelling/admitted.ts markerKeys): labeller.io/admitted-labels.<field manager>, or, for a field
manager that does not fit an annotation name, sha256-<the first 35 hex digits of its SHA-256>.
*/}}
{{- define "labeller.admittedLabelsMarker" -}}
{{- $fieldManager := .Values.fieldManager | default .Release.Name }}
{{- $longest := len "admitted-annotations." }}
{{- $suffix := $fieldManager }}
{{- if or (gt (len $fieldManager) (sub 63 $longest | int)) (not (regexMatch "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" $fieldManager)) }}
{{- $suffix = printf "sha256-%s" (sha256sum $fieldManager | trunc (sub 63 (add $longest 7) | int)) }}
{{- end }}
{{- printf "labeller.io/admitted-labels.%s" $suffix }}
{{- end }}
