/**
 * The Unitree G1 in MuJoCo's WebAssembly build (mujoco-js): the CPU twin's physics.
 *
 * The model is the one upstream's task runs: MuJoCo Playground's feet-only G1
 * (`g1_mjx_feetonly.xml`: Euler at 2 ms, 3 solver iterations, position actuators without kv and
 * joint damping instead, only the feet touching the floor) in `scene_mjx_feetonly_flat_terrain.xml`
 * with its `sensor.xml` (foot contacts), derived from MuJoCo Menagerie's G1 and vendored unchanged
 * in shared/humanoid/g1 with both licences (PROVENANCE.md there). Its meshes are not vendored:
 * every mesh geom is visual only (class `visual`: density 0, and like every geom of the model
 * contype and conaffinity 0, so it neither collides nor weighs; bodies carry their own inertials),
 * so they are removed before compiling and the physics is the same. A mesh geom that is not visual
 * (a model file edited to collide with a mesh) needs its file, and a missing one is refused, named.
 * Without the meshes the model compiles in about 0.1 s and steps at about 9-12k physics steps/s on
 * one core (bench/humanoid-physics.ts measures it).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DOMParser } from 'linkedom';
import loadMujocoModule, { type MainModule, type MjData, type MjModel } from 'mujoco-js';
import { ConfigError } from '../errors.ts';

export const G1_DIR = join(dirname(fileURLToPath(import.meta.url)), 'g1');
export const G1_ROBOT = 'g1_mjx_feetonly.xml';
export const G1_SCENE = 'scene_mjx_feetonly_flat_terrain.xml';

let module: Promise<MainModule> | undefined;

/** MuJoCo's WebAssembly module, started once per process (about 0.1-0.2 s). */
export function loadMujoco(): Promise<MainModule> {
  module ??= loadMujocoModule();
  return module;
}

/**
 * The robot's MJCF without its visual meshes: every `geom` with a `mesh` attribute of class
 * `visual` and every `mesh` asset no remaining geom uses. Returns the XML and the mesh files the
 * remaining geoms need (relative to the meshdir), each checked to exist under `dir`.
 */
export function stripVisualMeshes(xml: string, dir: string, file = G1_ROBOT): { xml: string; meshFiles: string[] } {
  const doc = new DOMParser().parseFromString(xml, 'text/xml');
  if (!doc.querySelector('mujoco')) throw new ConfigError('model', join(dir, file), 'is not an MJCF file (no <mujoco> element)');
  for (const geom of [...doc.querySelectorAll('geom[mesh]')]) {
    if (geom.getAttribute('class') === 'visual') geom.remove();
  }
  const used = new Set([...doc.querySelectorAll('geom[mesh]')].map((g) => g.getAttribute('mesh')));
  const meshdir = doc.querySelector('compiler')?.getAttribute('meshdir') ?? '';
  const meshFiles: string[] = [];
  for (const mesh of [...doc.querySelectorAll('asset > mesh')]) {
    const name = mesh.getAttribute('name') ?? mesh.getAttribute('file') ?? '';
    if (!used.has(name)) {
      mesh.remove();
      continue;
    }
    const meshFile = join(meshdir, mesh.getAttribute('file') ?? '');
    if (!existsSync(join(dir, meshFile))) {
      throw new ConfigError('model', join(dir, file), `geom mesh "${name}" collides and needs its file ${meshFile}, which is missing`);
    }
    meshFiles.push(meshFile);
  }
  return { xml: doc.toString(), meshFiles };
}

/** A compiled model and its data; `dispose()` frees both (WebAssembly memory is not collected). */
export interface G1Sim {
  readonly mujoco: MainModule;
  readonly model: MjModel;
  readonly data: MjData;
  dispose(): void;
}

let compiled = 0;

/**
 * Compiles the G1 scene (from `dir`, the vendored copy by default) with `timestep` as the physics
 * step, and resets the data to the keyframe named `keyframe`.
 */
export async function compileG1(options: { dir?: string; timestep?: number; keyframe?: string } = {}): Promise<G1Sim> {
  const dir = options.dir ?? G1_DIR;
  const mujoco = await loadMujoco();
  const scenePath = join(dir, G1_SCENE);
  if (!existsSync(scenePath)) throw new ConfigError('model', scenePath, 'is missing');
  const scene = readFileSync(scenePath, 'utf8');
  // The scene's includes (the robot, its sensors), each without its visual meshes.
  const files: [string, string | Buffer][] = [[G1_SCENE, scene]];
  const meshFiles = new Set<string>();
  for (const match of scene.matchAll(/<include\s+file="([^"]+)"/g)) {
    const name = match[1]!;
    if (!existsSync(join(dir, name))) throw new ConfigError('model', join(dir, name), `is missing (${G1_SCENE} includes it)`);
    const stripped = stripVisualMeshes(readFileSync(join(dir, name), 'utf8'), dir, name);
    files.push([name, stripped.xml]);
    for (const f of stripped.meshFiles) meshFiles.add(f);
  }
  for (const f of meshFiles) files.push([f, readFileSync(join(dir, f))]);
  // The compiled model keeps what it read: the files live in MuJoCo's in-memory FS only meanwhile.
  const folder = `/g1-${process.pid}-${compiled++}`;
  const folders = new Set<string>([folder]);
  for (const [name, body] of files) {
    const path = join(folder, name);
    mujoco.FS.mkdirTree(dirname(path), 0o700);
    folders.add(dirname(path));
    mujoco.FS.writeFile(path, body);
  }
  let model: MjModel;
  try {
    model = mujoco.MjModel.loadFromXML(join(folder, G1_SCENE));
  } catch (error) {
    const { name, message } = error as Error;
    throw new ConfigError('model', scenePath, `MuJoCo could not compile it (${name}${message ? `: ${message}` : ''})`);
  } finally {
    for (const [name] of files) mujoco.FS.unlink(join(folder, name));
    for (const path of [...folders].sort((a, b) => b.length - a.length)) mujoco.FS.rmdir(path);
  }
  if (options.timestep !== undefined) model.opt.timestep = options.timestep;
  const data = new mujoco.MjData(model);
  if (options.keyframe !== undefined) {
    const key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY.value, options.keyframe);
    if (key < 0) {
      data.delete();
      model.delete();
      throw new ConfigError('keyframe', options.keyframe, `is not a keyframe of ${G1_SCENE}`);
    }
    mujoco.mj_resetDataKeyframe(model, data, key);
  }
  mujoco.mj_forward(model, data);
  return {
    mujoco,
    model,
    data,
    dispose() {
      data.delete();
      model.delete();
    },
  };
}
