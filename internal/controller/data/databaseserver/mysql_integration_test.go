//go:build integration

package databaseserver

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

// newMySQLServer registers the test MariaDB as a DatabaseServer with engine mysql,
// port as given (0: unset).
func newMySQLServer(t *testing.T, port int32) *datav1alpha1.DatabaseServer {
	t.Helper()
	g := NewWithT(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: uniq("maria-admin")},
		StringData: map[string]string{"username": maria.Username, "password": maria.Password}}
	g.Expect(k.Create(context.Background(), sec)).To(Succeed())
	s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: uniq("maria")}, Spec: datav1alpha1.DatabaseServerSpec{
		Engine: datav1alpha1.EngineMySQL, Host: maria.Host, Port: port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Name: sec.Name},
	}}
	g.Expect(k.Create(context.Background(), s)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), s) })
	return s
}

// A mysql server is checked like a PostgreSQL one: Ready with its version and
// identity (MariaDB's, recorded by Orderly on the server).
func TestAMySQLServerIsReady(t *testing.T) {
	g := NewWithT(t)
	s := newMySQLServer(t, maria.Port)
	g.Eventually(func(g Gomega) {
		var got datav1alpha1.DatabaseServer
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(s), &got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, datav1alpha1.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		g.Expect(got.Status.ServerVersion).To(ContainSubstring("MariaDB"))
		g.Expect(got.Status.SystemIdentifier).To(HaveLen(36))
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReady).Message).To(HavePrefix("MariaDB "))
	}, timeout, poll).Should(Succeed())
}

// Without spec.port a mysql server is looked for on 3306, not PostgreSQL's 5432
// (the test MariaDB is elsewhere, so the message says where Orderly looked).
func TestAMySQLServerWithoutAPortIsLookedForOn3306(t *testing.T) {
	g := NewWithT(t)
	s := newMySQLServer(t, 0)
	g.Eventually(func(g Gomega) {
		var got datav1alpha1.DatabaseServer
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(s), &got)).To(Succeed())
		g.Expect(got.Spec.Port).To(BeZero(), "the API server defaulted the port")
		c := meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReachable)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring(":3306"))
	}, timeout, poll).Should(Succeed())
}

// The API server refuses a change of engine and extensions on a mysql server, with
// messages that say why; a postgres server without a port is still on 5432.
func TestTheEngineIsValidated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newMySQLServer(t, maria.Port)
	// A merge patch without a resourceVersion: the controller's status writes cannot
	// make it a conflict, so the answer is the validation's.
	err := k.Patch(ctx, s.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"engine":"postgres"}}`)))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("engine is immutable"))

	withExt := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: uniq("maria-ext")}, Spec: datav1alpha1.DatabaseServerSpec{
		Engine: datav1alpha1.EngineMySQL, Host: "h", AllowedExtensions: []string{"pgcrypto"},
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Name: "x"}}}
	err = k.Create(ctx, withExt)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("MySQL and MariaDB have no extensions"))

	bad := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: uniq("oracle")}, Spec: datav1alpha1.DatabaseServerSpec{
		Engine: "oracle", Host: "h", AdminCredentialsSecretRef: datav1alpha1.SecretReference{Name: "x"}}}
	err = k.Create(ctx, bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(strings.Contains(err.Error(), `"postgres", "mysql"`)).To(BeTrue(), err.Error())

	pgDefault := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: uniq("pg-default")}, Spec: datav1alpha1.DatabaseServerSpec{
		Host: "h", AdminCredentialsSecretRef: datav1alpha1.SecretReference{Name: "x"}}}
	g.Expect(k.Create(ctx, pgDefault)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), pgDefault) })
	g.Expect(pgDefault.Spec.Engine).To(Equal(datav1alpha1.EnginePostgres))
}
