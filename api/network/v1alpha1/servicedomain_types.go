package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Route kinds of a ServiceDomain.
const (
	// RouteGateway writes a Gateway API HTTPRoute attached to the zone's Gateway.
	RouteGateway = "Gateway"
	// RouteIngress writes an Ingress of the zone's ingress class.
	RouteIngress = "Ingress"
)

// TLS modes of a ServiceDomain.
const (
	// TLSZone asks the zone's issuer for a certificate.
	TLSZone = "Zone"
	// TLSNone asks for no certificate.
	TLSNone = "None"
)

// Condition types of a ServiceDomain.
const (
	// ConditionDNSReady is True when the record is in the DNS server (RFC2136) or
	// the DNSEndpoint is written (ExternalDNS).
	ConditionDNSReady = "DNSReady"
	// ConditionCertificateReady is True when cert-manager reports the certificate
	// Ready, or no certificate is wanted.
	ConditionCertificateReady = "CertificateReady"
	// ConditionRouteReady is True when the route is written and what it attaches to
	// exists.
	ConditionRouteReady = "RouteReady"
	// ConditionReady is True when the three above are.
	ConditionReady = "Ready"
)

// ServiceDomainLabel, on everything Orderly writes for a ServiceDomain, names it.
const ServiceDomainLabel = "network.orderly.dev/servicedomain"

// ServiceRef is the Service that the hostname routes to.
type ServiceRef struct {
	// name of the Service, in the ServiceDomain's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// port of the Service.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// ServiceDomainSpec is the hostname a team registers, and what it routes to.
type ServiceDomainSpec struct {
	// hostname is the DNS name to register, lower case, without a trailing dot. It
	// must end in the zone of a DomainZone whose allowedNamespaces selects this
	// namespace. It cannot be changed: create another ServiceDomain. At most 238
	// characters: its ownership record, _orderly-owner.<hostname>, must fit in 253.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=238
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?[.])+[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="hostname must be a lower-case DNS name of at least two labels without a trailing dot or wildcard, such as shop.int.example.com"
	// +kubebuilder:validation:XValidation:rule="self.split('.').all(l, size(l) <= 63)",message="each label of hostname must be at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="hostname cannot be changed; create another ServiceDomain"
	Hostname string `json:"hostname"`
	// service is where the hostname's traffic goes.
	// +required
	Service ServiceRef `json:"service"`
	// paths are the path prefixes routed to the service; "/" when absent.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.all(p, p.startsWith('/'))",message="each path must start with /"
	Paths []string `json:"paths,omitempty"`
	// route is Gateway (an HTTPRoute attached to the zone's Gateway) or Ingress (an
	// Ingress of the zone's ingress class).
	// +optional
	// +kubebuilder:default=Gateway
	// +kubebuilder:validation:Enum=Gateway;Ingress
	Route string `json:"route,omitempty"`
	// tls is Zone (a certificate from the zone's issuer) or None.
	// +optional
	// +kubebuilder:default=Zone
	// +kubebuilder:validation:Enum=Zone;None
	TLS string `json:"tls,omitempty"`
}

// DNSStatus is what was observed of the record.
type DNSStatus struct {
	// zone is the DomainZone the hostname falls in.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Zone string `json:"zone,omitempty"`
	// targetSource says where the record's value came from: Gateway
	// <namespace>/<name>, Ingress <name>, or the zone's fixed addresses.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	TargetSource string `json:"targetSource,omitempty"`
	// record is the record as written, e.g. "A 192.0.2.10" or "CNAME lb.example.com".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Record string `json:"record,omitempty"`
	// ownerRecord is the TXT record that marks the record as this ServiceDomain's
	// (RFC2136).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	OwnerRecord string `json:"ownerRecord,omitempty"`
	// lastChecked is when the record was last read back from the DNS server.
	// +optional
	LastChecked *metav1.Time `json:"lastChecked,omitempty"`
}

// CertificateStatus is what was observed of the certificate.
type CertificateStatus struct {
	// name of the cert-manager Certificate.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// secretName is the Secret cert-manager writes the key pair to.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`
	// notAfter is when the issued certificate expires.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
}

// RouteStatus is what was observed of the route.
type RouteStatus struct {
	// kind is HTTPRoute or Ingress.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`
	// name of the route.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// ServiceDomainStatus is what Orderly observed of a ServiceDomain.
type ServiceDomainStatus struct {
	// observedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: DNSReady, CertificateReady, RouteReady and Ready, each with a
	// reason and a message that says what is pending and why.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// dns is the record.
	// +optional
	DNS DNSStatus `json:"dns,omitempty"`
	// certificate is the certificate.
	// +optional
	Certificate CertificateStatus `json:"certificate,omitempty"`
	// route is the route.
	// +optional
	Route RouteStatus `json:"route,omitempty"`
}

// ServiceDomain registers a Service under a hostname: Orderly writes its DNS record,
// its TLS certificate (cert-manager) and its route (Gateway API HTTPRoute or Ingress),
// and reports whether all three are ready. The first ServiceDomain to claim a
// hostname keeps it; another one for the same hostname reports Conflict and touches
// nothing.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sd
// +kubebuilder:printcolumn:name="Hostname",type=string,JSONPath=`.spec.hostname`
// +kubebuilder:printcolumn:name="Record",type=string,JSONPath=`.status.dns.record`
// +kubebuilder:printcolumn:name="DNS",type=string,JSONPath=`.status.conditions[?(@.type=="DNSReady")].status`
// +kubebuilder:printcolumn:name="Cert",type=string,JSONPath=`.status.conditions[?(@.type=="CertificateReady")].status`
// +kubebuilder:printcolumn:name="Route",type=string,JSONPath=`.status.conditions[?(@.type=="RouteReady")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.status.certificate.notAfter`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServiceDomain struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the hostname and its service.
	// +required
	Spec ServiceDomainSpec `json:"spec"`
	// status is what was observed.
	// +optional
	Status ServiceDomainStatus `json:"status,omitempty"`
}

// ServiceDomainList is a list of ServiceDomains.
// +kubebuilder:object:root=true
type ServiceDomainList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceDomain `json:"items"`
}

// ClaimHolder is the ServiceDomain that holds a hostname.
type ClaimHolder struct {
	// namespace of the ServiceDomain.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the ServiceDomain.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid of the ServiceDomain: a later one of the same name does not inherit the claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
}

// HostnameClaimSpec records who holds a hostname.
type HostnameClaimSpec struct {
	// hostname claimed (also the object's name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Hostname string `json:"hostname"`
	// holder is the ServiceDomain that claimed it first.
	// +required
	Holder ClaimHolder `json:"holder"`
}

// HostnameClaim records which ServiceDomain holds a hostname, cluster-wide: the
// manager creates one, named after the hostname, before it writes anything for a
// ServiceDomain, and only when none exists (create-if-absent), so the first
// ServiceDomain wins and the claim outlives manager restarts. The manager alone
// writes them; nobody else should be granted write access to them.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:validation:XValidation:rule="self.metadata.name == self.spec.hostname",message="a HostnameClaim is named after its hostname"
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="a HostnameClaim cannot be changed; it is deleted when its ServiceDomain goes"
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.holder.namespace`
// +kubebuilder:printcolumn:name="ServiceDomain",type=string,JSONPath=`.spec.holder.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostnameClaim struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the claim.
	// +required
	Spec HostnameClaimSpec `json:"spec"`
}

// HostnameClaimList is a list of HostnameClaims.
// +kubebuilder:object:root=true
type HostnameClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostnameClaim `json:"items"`
}
