import java.lang.management.*;
public class Spawn {
  public static void main(String[] a) throws Exception {
    java.io.File f = java.io.File.createTempFile("spawn", ".x");
    int n = Integer.parseInt(a[0]);
    for (int i = 0; i < n; i++) {
      Process p = new ProcessBuilder("chmod", "0644", f.getPath()).start();
      p.waitFor();
    }
    f.delete();
  }
}
