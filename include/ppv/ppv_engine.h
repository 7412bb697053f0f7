/* ppv_engine.h - the engine layer's public interface, for users who want it
 * whole: one header per room of the engine, each usable on its own.
 *
 *   ppv_schedule.h  the schedule IR, its readers and writers
 *   ppv_check.h     send semantics, costs, memory model, lowering, the checker
 *   ppv_gen.h       the schedule generators and the tuner
 *   ppv_world.h     transports, the mock world and its scheduler
 *   ppv_run.h       one training step on any transport
 *   ppv_pp.h        the PP inference contract and pipeline
 */
#ifndef PPV_ENGINE_H
#define PPV_ENGINE_H

#include "ppv_check.h"
#include "ppv_gen.h"
#include "ppv_pp.h"
#include "ppv_run.h"
#include "ppv_schedule.h"
#include "ppv_world.h"

#endif
