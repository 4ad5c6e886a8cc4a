// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package gobackend

// BucketLen is bucketLen, for the external test package.
var BucketLen = bucketLen
