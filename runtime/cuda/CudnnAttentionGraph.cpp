//===- CudnnAttentionGraph.cpp - cuDNN's fused attention graphs -----------===//
//
// Built with cuDNN's frontend (header-only; scripts/install-deps.sh fetches
// its headers) where the build found it. A forward is one SDPA node
// writing the output and each row's logsumexp (`Stats`, natural log, as
// the generated kernels store it); a backward is one SDPA backward node,
// deterministic, and beside it the forward over the same operands, which
// the load's check runs to give the backward consistent outputs and
// logsumexps. Tensors are [batch, heads, rows, width] with the operands'
// own strides: the row windows of a fused projection are read in place.
//
//===----------------------------------------------------------------------===//
#include "CudnnAttention.h"

#include <cudnn_frontend.h>

// The frontend's experimental engines (an sm_100 RMS norm) compile kernels
// with NVRTC, which this plugin neither uses nor loads: stand-ins, seen
// only inside the plugin, that refuse.
#define GPUC_NO_NVRTC __attribute__((visibility("hidden")))
extern "C" {
GPUC_NO_NVRTC nvrtcResult nvrtcCreateProgram(nvrtcProgram *, const char *,
                                             const char *, int,
                                             const char *const *,
                                             const char *const *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
GPUC_NO_NVRTC nvrtcResult nvrtcDestroyProgram(nvrtcProgram *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
GPUC_NO_NVRTC nvrtcResult nvrtcCompileProgram(nvrtcProgram, int,
                                              const char *const *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
GPUC_NO_NVRTC nvrtcResult nvrtcGetCUBINSize(nvrtcProgram, size_t *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
GPUC_NO_NVRTC nvrtcResult nvrtcGetCUBIN(nvrtcProgram, char *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
GPUC_NO_NVRTC nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram, size_t *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
GPUC_NO_NVRTC nvrtcResult nvrtcGetProgramLog(nvrtcProgram, char *) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
}

namespace gpuc {
namespace cuda_device {

namespace fe = cudnn_frontend;

namespace {

/// A tensor's uid in the graphs: its operand's place in this list.
const std::vector<std::string> &operandNames() {
  static const std::vector<std::string> names = {
      "q", "k", "v", "out", "lse", "d_out", "dq", "dk", "dv"};
  return names;
}
int64_t uidOf(const std::string &name) {
  const auto &names = operandNames();
  return std::find(names.begin(), names.end(), name) - names.begin() + 1;
}

std::string describe(fe::error_t status) {
  return status.get_message().empty() ? "cuDNN refused it"
                                      : status.get_message();
}

/// One built graph and the operands it binds.
struct BuiltGraph {
  fe::graph::Graph graph;
  std::vector<std::string> bound;
  int64_t workspace = 0;
};

class Graphs final : public CudnnAttention {
public:
  explicit Graphs(const CudnnAttentionShape &shape) : shape(shape) {}

  bool build(cudnnHandle_t dnn, std::string &why) {
    if (!buildOne(dnn, forward, /*backward=*/false, why))
      return false;
    if (shape.backward && !buildOne(dnn, backward, /*backward=*/true, why))
      return false;
    return true;
  }

  size_t workspaceBytes() const override {
    return (size_t)std::max(forward.workspace, backward.workspace);
  }

  bool run(cudnnHandle_t dnn, const std::vector<CUdeviceptr> &args,
           CUdeviceptr workspace, std::string &error) override {
    return execute(dnn, shape.backward ? backward : forward, args, workspace,
                   error);
  }

  bool runForward(cudnnHandle_t dnn, const std::vector<CUdeviceptr> &args,
                  CUdeviceptr workspace, std::string &error) override {
    return execute(dnn, forward, args, workspace, error);
  }

private:
  std::shared_ptr<fe::graph::Tensor_attributes>
  tensor(BuiltGraph &built, const std::string &name) {
    const CudnnAttentionShape::Operand &o = shape.operands.at(name);
    built.bound.push_back(name);
    return built.graph.tensor(
        fe::graph::Tensor_attributes()
            .set_name(name)
            .set_uid(uidOf(name))
            .set_dim({shape.batch, shape.headsOf(name), shape.rowsOf(name),
                      shape.widthOf(name)})
            .set_stride({o.strides[0], o.strides[1], o.strides[2], 1}));
  }

  void output(BuiltGraph &built,
              const std::shared_ptr<fe::graph::Tensor_attributes> &t,
              const std::string &name) {
    const CudnnAttentionShape::Operand &o = shape.operands.at(name);
    built.bound.push_back(name);
    t->set_output(true)
        .set_uid(uidOf(name))
        .set_dim({shape.batch, shape.headsOf(name), shape.rowsOf(name),
                  shape.widthOf(name)})
        .set_stride({o.strides[0], o.strides[1], o.strides[2], 1});
    if (name == "lse")
      t->set_data_type(fe::DataType_t::FLOAT);
  }

  bool buildOne(cudnnHandle_t dnn, BuiltGraph &built, bool isBackward,
                std::string &why) {
    fe::graph::Graph &g = built.graph;
    g.set_io_data_type(shape.bf16 ? fe::DataType_t::BFLOAT16
                                  : fe::DataType_t::HALF)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto q = tensor(built, "q"), k = tensor(built, "k"), v = tensor(built, "v");
    if (!isBackward) {
      auto attributes = fe::graph::SDPA_attributes()
                            .set_name("attention")
                            .set_generate_stats(true)
                            .set_attn_scale(shape.scale);
      if (shape.causal)
        attributes.set_causal_mask(true);
      auto [out, stats] = g.sdpa(q, k, v, attributes);
      output(built, out, "out");
      output(built, stats, "lse");
    } else {
      auto out = tensor(built, "out"), dOut = tensor(built, "d_out");
      auto stats = tensor(built, "lse");
      stats->set_data_type(fe::DataType_t::FLOAT);
      auto attributes = fe::graph::SDPA_backward_attributes()
                            .set_name("attention_backward")
                            .set_attn_scale(shape.scale)
                            .set_deterministic_algorithm(true);
      if (shape.causal)
        attributes.set_causal_mask(true);
      auto [dq, dk, dv] =
          g.sdpa_backward(q, k, v, out, dOut, stats, attributes);
      output(built, dq, "dq");
      output(built, dk, "dk");
      output(built, dv, "dv");
    }
    fe::error_t status = g.validate();
    if (status.is_good())
      status = g.build_operation_graph(dnn);
    if (status.is_good())
      status = g.create_execution_plans({fe::HeurMode_t::A});
    if (status.is_good())
      status = g.check_support(dnn);
    if (status.is_good())
      status = g.build_plans(dnn);
    if (status.is_good())
      status = g.get_workspace_size(built.workspace);
    if (!status.is_good()) {
      why = std::string(isBackward ? "backward" : "forward") + ": " +
            describe(status);
      return false;
    }
    return true;
  }

  bool execute(cudnnHandle_t dnn, BuiltGraph &built,
               const std::vector<CUdeviceptr> &args, CUdeviceptr workspace,
               std::string &error) {
    std::unordered_map<int64_t, void *> pack;
    for (const std::string &name : built.bound) {
      const CudnnAttentionShape::Operand &o = shape.operands.at(name);
      size_t element = name == "lse" ? 4 : 2;
      pack[uidOf(name)] =
          reinterpret_cast<void *>(args[o.arg] + o.offset * element);
    }
    try {
      fe::error_t status =
          built.graph.execute(dnn, pack, reinterpret_cast<void *>(workspace));
      if (!status.is_good()) {
        error = "cuDNN's fused attention failed: " + describe(status);
        return false;
      }
    } catch (const std::exception &e) {
      error = std::string("cuDNN's fused attention failed: ") + e.what();
      return false;
    }
    return true;
  }

  CudnnAttentionShape shape;
  BuiltGraph forward, backward;
};

} // namespace

bool cudnnAttentionBuilt() { return true; }

std::unique_ptr<CudnnAttention>
buildCudnnAttention(cudnnHandle_t dnn, const CudnnAttentionShape &shape,
                    std::string &why) {
  // The frontend reports with exceptions in places (a tensor it cannot
  // describe): each is a refusal, not a crash.
  try {
    auto graphs = std::make_unique<Graphs>(shape);
    if (!graphs->build(dnn, why))
      return nullptr;
    return graphs;
  } catch (const std::exception &e) {
    why = std::string("cuDNN's frontend: ") + e.what();
    return nullptr;
  }
}

} // namespace cuda_device
} // namespace gpuc
