//===- BinaryProgram.h - 0-1 linear programs, solved by COIN-OR CBC -------===//
//
// gpuc-remat's exact mode poses the choice of values to recompute as a
// 0-1 linear program. This is the one place that talks to the solver
// (COIN-OR CBC, optional at build time), on plain vectors: no MLIR here.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TRANSFORMS_BINARYPROGRAM_H
#define GPUC_TRANSFORMS_BINARYPROGRAM_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlir::gpuc {

/// minimize   sum_i cost[i] * x[i] + peakCost * z
/// subject to sum_i a[r][i] * x[i] - (peakCost > 0 ? z : 0) <= bound[r]
///            for every row r;  x[i] in {0, 1};  z >= 0 continuous.
/// With peakCost = 0 there is no z.
struct BinaryProgram {
  std::vector<double> cost;
  /// Each row's nonzero coefficients, as (variable, coefficient).
  std::vector<std::vector<std::pair<unsigned, double>>> rows;
  std::vector<double> bound;
  double peakCost = 0;
};

struct BinaryProgramResult {
  enum Status {
    /// Proven optimal.
    Optimal,
    /// The time limit ran out with a feasible solution, maybe not optimal.
    Feasible,
    /// Proven to have no solution.
    Infeasible,
    /// No solution found (time limit, or a solver failure).
    Failed,
  } status = Failed;
  std::vector<bool> chosen;
  double z = 0, objective = 0;
  /// The solver's proven lower bound on the objective.
  double bound = 0;
};

/// Whether this gpuc was built with CBC.
bool haveBinaryProgramSolver();

/// Solves `program` within `seconds`. Without CBC, returns Failed.
BinaryProgramResult solveBinaryProgram(const BinaryProgram &program,
                                       double seconds);

} // namespace mlir::gpuc

#endif // GPUC_TRANSFORMS_BINARYPROGRAM_H
