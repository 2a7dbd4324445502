package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DNS providers of a DomainZone.
const (
	// ProviderRFC2136 sends RFC 2136 dynamic updates, signed with TSIG, to a DNS server.
	ProviderRFC2136 = "RFC2136"
	// ProviderExternalDNS writes external-dns DNSEndpoint objects; external-dns does the rest.
	ProviderExternalDNS = "ExternalDNS"
)

// Where the value of a ServiceDomain's DNS record comes from.
const (
	// TargetFromRoute takes the record's value from the route: the Gateway's
	// status.addresses, or the Ingress's status.loadBalancer.
	TargetFromRoute = "Route"
	// TargetFromFixed takes the record's value from the zone's target.addresses.
	TargetFromFixed = "Fixed"
)

// RFC2136 is a DNS server that accepts dynamic updates signed with TSIG.
type RFC2136 struct {
	// server is the DNS server's address, host:port (a port is required, usually 53).
	// Updates go to it over TCP, and Orderly reads the zone's current records from
	// it with ordinary queries.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:Pattern=`^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$`
	Server string `json:"server"`
	// tsigSecretRef names a Secret in the manager's namespace (never in a team's)
	// holding the TSIG key: `name` (the key's name, as the server knows it),
	// `algorithm` (hmac-sha256, hmac-sha512, ...; hmac-sha256 when absent) and
	// `secret` (the base64 key, as tsig-keygen prints it).
	// +required
	TSIGSecretRef LocalSecretRef `json:"tsigSecretRef"`
	// ttl is the TTL of the records Orderly writes, in seconds.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=86400
	TTL int32 `json:"ttl,omitempty"`
}

// LocalSecretRef names a Secret in the manager's namespace.
type LocalSecretRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ExternalDNS writes DNSEndpoint objects (externaldns.k8s.io/v1alpha1) beside each
// ServiceDomain; external-dns, run with `--source=crd`, publishes them.
type ExternalDNS struct {
	// ttl is the recordTTL of the endpoints Orderly writes, in seconds.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=86400
	TTL int32 `json:"ttl,omitempty"`
}

// DNS is how a zone's records are written.
// +kubebuilder:validation:XValidation:rule="(self.provider == 'RFC2136') == has(self.rfc2136)",message="rfc2136 is set exactly when provider is RFC2136"
// +kubebuilder:validation:XValidation:rule="self.provider == 'ExternalDNS' || !has(self.externalDNS)",message="externalDNS is only for provider ExternalDNS"
type DNS struct {
	// provider is RFC2136 (Orderly updates a DNS server itself) or ExternalDNS
	// (Orderly writes DNSEndpoint objects for external-dns).
	// +required
	// +kubebuilder:validation:Enum=RFC2136;ExternalDNS
	Provider string `json:"provider"`
	// rfc2136 is the DNS server, for provider RFC2136.
	// +optional
	RFC2136 *RFC2136 `json:"rfc2136,omitempty"`
	// externalDNS configures provider ExternalDNS.
	// +optional
	ExternalDNS *ExternalDNS `json:"externalDNS,omitempty"`
	// resyncInterval is how often each ServiceDomain's records are read back from
	// the DNS server and repaired when changed or deleted by hand, and how often
	// kinds that were not installed (cert-manager, Gateway API, external-dns) are
	// looked for again.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="resyncInterval must be between 1s and 24h"
	ResyncInterval metav1.Duration `json:"resyncInterval,omitempty"`
}

// IssuerRef is a cert-manager issuer.
type IssuerRef struct {
	// kind is ClusterIssuer, or Issuer (then one of that name in the ServiceDomain's
	// own namespace).
	// +optional
	// +kubebuilder:default=ClusterIssuer
	// +kubebuilder:validation:Enum=ClusterIssuer;Issuer
	Kind string `json:"kind,omitempty"`
	// name of the issuer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Certificates is how the zone's certificates are issued.
type Certificates struct {
	// issuerRef is the cert-manager issuer of the zone's certificates. Without it,
	// ServiceDomains of the zone get no certificate.
	// +optional
	IssuerRef *IssuerRef `json:"issuerRef,omitempty"`
}

// GatewayRef is a Gateway API Gateway.
type GatewayRef struct {
	// name of the Gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace of the Gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// sectionName is the Gateway's listener the routes attach to; all listeners
	// when absent.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SectionName string `json:"sectionName,omitempty"`
}

// ZoneRoute is what ServiceDomains of the zone route through.
// +kubebuilder:validation:XValidation:rule="has(self.gateway) || has(self.ingressClassName)",message="name a gateway, an ingressClassName, or both"
// +kubebuilder:validation:MinProperties=1
type ZoneRoute struct {
	// gateway is the Gateway that ServiceDomains' HTTPRoutes attach to (route:
	// Gateway).
	// +optional
	Gateway *GatewayRef `json:"gateway,omitempty"`
	// ingressClassName is the class of the Ingresses of ServiceDomains that ask for
	// route: Ingress.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	IngressClassName string `json:"ingressClassName,omitempty"`
}

// Target is where the value of the zone's records comes from.
// +kubebuilder:validation:XValidation:rule="(self.from == 'Fixed') == (has(self.addresses) && size(self.addresses) > 0)",message="addresses are set exactly when from is Fixed"
type Target struct {
	// from is Route (the Gateway's status.addresses, or the Ingress's
	// status.loadBalancer) or Fixed (addresses below).
	// +optional
	// +kubebuilder:default=Route
	// +kubebuilder:validation:Enum=Route;Fixed
	From string `json:"from,omitempty"`
	// addresses are the record's values for from: Fixed: IP addresses (A and AAAA
	// records), or one hostname (a CNAME record).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	Addresses []string `json:"addresses,omitempty"`
}

// DomainZoneSpec is what the platform team declares of a zone.
type DomainZoneSpec struct {
	// zone is the DNS zone, e.g. int.example.com: ServiceDomains' hostnames end in it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?[.])*[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="zone must be a lower-case DNS name without a trailing dot, such as int.example.com"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="zone cannot be changed; create another DomainZone"
	Zone string `json:"zone"`
	// allowedNamespaces selects the namespaces whose ServiceDomains may claim
	// hostnames in this zone. An empty selector ({}) allows every namespace
	// (kube-* and the manager's namespace are never allowed).
	// +required
	AllowedNamespaces metav1.LabelSelector `json:"allowedNamespaces"`
	// dns is how records are written.
	// +required
	DNS DNS `json:"dns"`
	// certificates is how certificates are issued; none when absent.
	// +optional
	Certificates *Certificates `json:"certificates,omitempty"`
	// route is the Gateway and/or ingress class that ServiceDomains route through.
	// +required
	Route ZoneRoute `json:"route"`
	// target is where the value of the records comes from.
	// +optional
	// +kubebuilder:default={from: Route}
	Target Target `json:"target,omitempty"`
}

// Conditions of a DomainZone, besides Ready.
const (
	// ZoneConditionCredentialsReady: the TSIG Secret exists in the manager's
	// namespace, holds a usable key, and the DNS server accepts it (RFC2136).
	ZoneConditionCredentialsReady = "CredentialsReady"
	// ZoneConditionServerReachable: the DNS server answers authoritatively for the
	// zone (RFC2136), or the DNSEndpoint kind is served (ExternalDNS).
	ZoneConditionServerReachable = "ServerReachable"
)

// DomainZoneStatus is what Orderly observed of the zone.
type DomainZoneStatus struct {
	// conditions: Ready (records can be written to the zone), CredentialsReady and
	// ServerReachable, each with a reason.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// DomainZone is a DNS zone in which teams may register services: its DNS provider,
// its certificate issuer, its route and which namespaces may use it. Platform teams
// create it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=dz
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.spec.zone`
// +kubebuilder:printcolumn:name="DNS",type=string,JSONPath=`.spec.dns.provider`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DomainZone struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the zone.
	// +required
	Spec DomainZoneSpec `json:"spec"`
	// status is what Orderly observed of it.
	// +optional
	Status DomainZoneStatus `json:"status,omitempty"`
}

// DomainZoneList is a list of DomainZones.
// +kubebuilder:object:root=true
type DomainZoneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DomainZone `json:"items"`
}
