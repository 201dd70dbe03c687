export {
  findStore,
  initStore,
  isPostgresUrl,
  openStore,
  STORE_CONFIG_FILE,
  STORE_DIRECTORY_NAME,
  STORE_FORMAT_VERSION,
  STORE_MARKER_FILE,
  type StoreLocation,
  workspaceLockOf,
} from './layout.js';
export type {
  ObjectBatch,
  ObjectInfo,
  ObjectSource,
  ObjectStore,
  StoredObject,
} from './object-store.js';
export { createObjectStore } from './objects.js';
export { openObjectStore } from './open-objects.js';
export {
  type BucketObjectStore,
  createS3ObjectStore,
  MULTIPART_PART_BYTES,
  objectKeyOf,
  parseS3Url,
  type S3Location,
  type S3ObjectStoreOptions,
  type Transfer,
} from './s3-objects.js';
export {
  decodeTree,
  encodeTree,
  findEntryAt,
  type ObjectReference,
  putTree,
  putTreeIn,
  reachableObjects,
  readTree,
  TREE_FORMAT_VERSION,
  type Tree,
  type TreeEntry,
  walkReferences,
} from './tree.js';
