//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const deployDir = "../../deploy"

// loadManifests decodes every object of the files deploy/kustomization.yaml
// lists, in its order.
func loadManifests() ([]runtime.Object, error) {
	b, err := os.ReadFile(filepath.Join(deployDir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", deployDir, err)
	}
	var out []runtime.Object
	for _, r := range k.Resources {
		path := filepath.Join(deployDir, r)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		objs, err := decodeManifests(b, path)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// decodeManifests decodes a multi-document YAML stream from source.
func decodeManifests(b []byte, source string) ([]runtime.Object, error) {
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []runtime.Object
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		out = append(out, obj)
	}
}

// applyAccessManifests creates what deploy/ ships for probed's access: the
// namespace, service accounts, RBAC, the node-confinement policies, the
// scraper and plugin roles and the reviews' FlowSchema. The DaemonSet itself is for the end-to-end tier, where a
// kubelet runs it.
func applyAccessManifests(ctx context.Context, c kubernetes.Interface) error {
	objs, err := loadManifests()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *v1.Namespace:
			_, err = c.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *v1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *flowcontrolv1.FlowSchema:
			_, err = c.FlowcontrolV1().FlowSchemas().Create(ctx, o, metav1.CreateOptions{})
		case *flowcontrolv1.PriorityLevelConfiguration:
			_, err = c.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, o, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.DaemonSet:
			continue
		default:
			return fmt.Errorf("unexpected object %T in %s", obj, deployDir)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T: %w", obj, err)
		}
	}
	return nil
}
