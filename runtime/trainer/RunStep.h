//===- RunStep.h - one step on given inputs ---------------------*- C++ -*-===//
#ifndef GPUC_TRAINER_RUNSTEP_H
#define GPUC_TRAINER_RUNSTEP_H

#include "Options.h"

namespace gpuc::trainer {

class CompiledStep;

/// --run-step: one step of the step program on IN_DIR/<input>.npy, writing
/// its outputs and every parameter and state to --output-dir as .npy (what
/// the tests compare with the interpreter).
int runStep(CompiledStep &s, const Options &o);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_RUNSTEP_H
