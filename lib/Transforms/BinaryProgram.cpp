//===- BinaryProgram.cpp - 0-1 linear programs, solved by COIN-OR CBC -----===//
//
// CBC's C interface, so its C++ headers (and their warnings) stay out of the
// build. Built without CBC (GPUC_HAVE_CBC undefined), every solve fails and
// gpuc-remat says how to get the exact mode.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Transforms/BinaryProgram.h"

#ifdef GPUC_HAVE_CBC
#include <Cbc_C_Interface.h>
#endif

using namespace mlir::gpuc;

bool mlir::gpuc::haveBinaryProgramSolver() {
#ifdef GPUC_HAVE_CBC
  return true;
#else
  return false;
#endif
}

BinaryProgramResult mlir::gpuc::solveBinaryProgram(const BinaryProgram &program,
                                                   double seconds) {
  BinaryProgramResult result;
#ifdef GPUC_HAVE_CBC
  unsigned numBinary = program.cost.size();
  bool withPeak = program.peakCost > 0;
  unsigned numColumns = numBinary + (withPeak ? 1 : 0);
  unsigned numRows = program.rows.size();

  // Column-major (CSC) form of the rows.
  std::vector<std::vector<std::pair<int, double>>> columns(numColumns);
  for (unsigned r = 0; r < numRows; ++r) {
    for (auto [i, a] : program.rows[r])
      if (a != 0)
        columns[i].push_back({(int)r, a});
    if (withPeak)
      columns[numBinary].push_back({(int)r, -1.0});
  }
  std::vector<CoinBigIndex> start{0};
  std::vector<int> index;
  std::vector<double> value;
  for (const auto &column : columns) {
    for (auto [r, a] : column) {
      index.push_back(r);
      value.push_back(a);
    }
    start.push_back(index.size());
  }
  std::vector<double> lower(numColumns, 0.0), upper(numColumns, 1.0);
  std::vector<double> objective(program.cost);
  if (withPeak) {
    upper[numBinary] = 1e30;
    objective.push_back(program.peakCost);
  }
  std::vector<double> rowLower(numRows, -1e30), rowUpper(program.bound);

  Cbc_Model *model = Cbc_newModel();
  Cbc_loadProblem(model, numColumns, numRows, start.data(), index.data(),
                  value.data(), lower.data(), upper.data(), objective.data(),
                  rowLower.data(), rowUpper.data());
  for (unsigned i = 0; i < numBinary; ++i)
    Cbc_setInteger(model, i);
  Cbc_setLogLevel(model, 0);
  Cbc_setMaximumSeconds(model, seconds);
  // Costs are FLOP counts: ask for the optimum, not within CBC's default
  // relative gap.
  Cbc_setAllowableGap(model, 0.0);
  Cbc_setAllowableFractionGap(model, 0.0);
  Cbc_solve(model);

  if (Cbc_isProvenInfeasible(model)) {
    result.status = BinaryProgramResult::Infeasible;
  } else if (const double *x = Cbc_bestSolution(model)) {
    result.status = Cbc_isProvenOptimal(model) ? BinaryProgramResult::Optimal
                                               : BinaryProgramResult::Feasible;
    result.chosen.resize(numBinary);
    for (unsigned i = 0; i < numBinary; ++i)
      result.chosen[i] = x[i] > 0.5;
    result.z = withPeak ? x[numBinary] : 0;
    result.objective = Cbc_getObjValue(model);
    result.bound = Cbc_getBestPossibleObjValue(model);
  }
  Cbc_deleteModel(model);
#else
  (void)program;
  (void)seconds;
#endif
  return result;
}
