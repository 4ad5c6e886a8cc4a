module github.com/gomlx/compute

go 1.26

require (
	github.com/google/go-cmp v0.7.0
	github.com/pkg/errors v0.9.1
	golang.org/x/exp v0.0.0-20260410095643-746e56fc9e2f
	k8s.io/klog/v2 v2.140.0
)

require github.com/go-logr/logr v1.4.3 // indirect
