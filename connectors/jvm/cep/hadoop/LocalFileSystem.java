package cep.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksum files and all) whose raw layer sets permission bits through java.nio.
 *
 * Why: without Hadoop's native library (PySpark ships none) RawLocalFileSystem.setPermission forks a `chmod`
 * process, and it is called for every file and directory Hadoop creates: a cep micro-batch writes 8 files and
 * their 8 checksum files (checkpoint logs, state changelogs, output parts), 16 processes, ~0.05 CPU s per
 * micro-batch on the JVM (bench/results/spark.md). The bits set are the same; setuid/setgid/sticky bits, and file
 * systems without POSIX permissions, still go to Hadoop's own method.
 *
 * Compiled by cep (connectors/localfs.py) with Spark's own Java compiler, Janino: written in the Java it takes.
 */
public class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
    public LocalFileSystem() {
        super(new RawLocalFileSystem());
    }

    /** Hadoop's raw local file system with setPermission through java.nio. */
    public static class RawLocalFileSystem extends org.apache.hadoop.fs.RawLocalFileSystem {
        public void setPermission(Path p, FsPermission permission) throws IOException {
            int mode = permission.toShort();
            if ((mode & 07000) != 0) {
                super.setPermission(p, permission);
                return;
            }
            StringBuilder rwx = new StringBuilder(9);
            for (int bit = 8; bit >= 0; bit--) {
                rwx.append((mode & (1 << bit)) == 0 ? '-' : "rwx".charAt((8 - bit) % 3));
            }
            try {
                Files.setPosixFilePermissions(pathToFile(p).toPath(), PosixFilePermissions.fromString(rwx.toString()));
            } catch (UnsupportedOperationException e) {
                super.setPermission(p, permission);
            }
        }
    }
}
