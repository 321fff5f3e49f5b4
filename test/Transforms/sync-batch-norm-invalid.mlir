// RUN: gpuc-opt %s --verify-diagnostics --gpuc-sync-batch-norm

// expected-error @below {{gpuc-sync-batch-norm: the module has no @forward}}
module {
}
