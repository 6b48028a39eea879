package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestNodeClaimError(t *testing.T) {
	sa := "system:serviceaccount:probed-system:probed"
	for _, tc := range []struct {
		name string
		ui   authnv1.UserInfo
		want string // "" for no error
	}{
		{"bound to this node", authnv1.UserInfo{Username: sa, Extra: map[string]authnv1.ExtraValue{nodeNameExtra: {"node-a"}}}, ""},
		{"no claim", authnv1.UserInfo{Username: sa}, "carries no authentication.kubernetes.io/node-name claim"},
		{"other node", authnv1.UserInfo{Username: sa, Extra: map[string]authnv1.ExtraValue{nodeNameExtra: {"node-b"}}}, `bound to node "node-b", but --node-name is "node-a"`},
		{"a user", authnv1.UserInfo{Username: "kubernetes-admin"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := nodeClaimError(tc.ui, "node-a")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v; want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want one saying %q", err, tc.want)
			}
		})
	}
}

func TestCheckNodeClaimAsksTheAPIServer(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authnv1.SelfSubjectReview{Status: authnv1.SelfSubjectReviewStatus{UserInfo: authnv1.UserInfo{
			Username: "system:serviceaccount:x:probed"}}}, nil
	})
	if err := checkNodeClaim(context.Background(), fromclientset.New(c), "node-a"); err == nil {
		t.Error("a token without the claim passed")
	}
	down := fake.NewClientset()
	down.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if err := checkNodeClaim(context.Background(), fromclientset.New(down), "node-a"); err != nil {
		t.Errorf("an unreachable API server failed the start: %v", err)
	}
}
